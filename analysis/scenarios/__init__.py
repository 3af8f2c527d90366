"""The benchmark's standard worlds (``mobidfl bench``): one TOML file per scenario.

Each ``<name>.toml`` holds an ``[about]`` table (name, version, title, provenance, why it is
in the set), the ``[world]`` it fixes for every policy (map, agents, mobility, speeds,
radius, contact rule, data set, partition, net, local training, test set), an optional
``[axes]`` table (a second axis, e.g. the UAVs' mobility) and ``[scales.ci]`` /
``[scales.small]`` / ``[scales.full]`` departures, each with its note. ``_links.toml``
is the link axis every scenario runs on; ``_policies.toml`` the policies' own settings at
their papers' values. Read by :mod:`mobidfl.analysis.bench_scenarios`. Beside them,
``studies/`` holds the controlled studies and ``papers/`` the paper reproduction specs
(``mobidfl reproduce``), in the same style.
"""

SET_VERSION = "2026.11-1"
"""Version of the scenario set: changes whenever a world, a link or a policy setting does."""
