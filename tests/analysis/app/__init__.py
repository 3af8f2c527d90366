"""Tests of mobidfl.analysis.app (analysis/app/), the interactive app."""
