"""Tests of mobidfl.model.maths (model/maths/)."""
