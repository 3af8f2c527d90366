"""Tests of mobidfl.model.learning (model/learning/)."""
