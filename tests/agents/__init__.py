"""Tests of mobidfl.agents (agents/)."""
