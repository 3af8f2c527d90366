"""Tests of mobidfl.maps (maps/)."""
