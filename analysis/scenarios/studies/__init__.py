"""Controlled studies (``mobidfl bench --study NAME``): one TOML file per study.

Each ``<name>.toml`` holds ``[about]``, a ``[base]`` world written whole (as a scenario's
``[world]``), ``[factors.<f>]`` with a ``base`` level and ``levels`` (what each level changes
from the base), ``[crosses.<name>]`` (two factors whose non-base levels are crossed),
``[heldout.<name>]`` worlds that check the decision rule without drawing it, and
``[scales.*]``. Read by :mod:`mobidfl.analysis.study`.
"""
