"""Tests of mobidfl.model (model/)."""
