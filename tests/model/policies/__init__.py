"""Tests of mobidfl.model.policies (model/policies/)."""
