"""Tests of the mobidfl front door (mobidfl/): settings, registries, errors, files."""
