"""The paper reproduction specs (``mobidfl reproduce PAPER``): one TOML file per spec.

Each ``<name>.toml`` holds an ``[about]`` table (the paper, its preset, the world sentence and
the reading of record), the ``[variants]`` the headline compares (settings on top of the
preset), the ``[scales]`` with each scale's note, per-variant departures
(``[variant_scales]``), the variants a scale leaves out (``[skip]``), the other
``[[readings]]`` of ambiguous passages and the ``[[claims]]``. ``_papers.toml`` lists the specs
in their order and the short names ``mobidfl reproduce`` takes. Read by
:mod:`mobidfl.analysis.paper_specs`.
"""
