"""Tests of mobidfl.analysis (analysis/): the CLI, bench, studies, sweeps, pages."""
