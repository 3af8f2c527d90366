"""Exchange policies, registered by name in :data:`POLICIES` (setting ``policy``).

Importing this package imports every policy module once; add one line per new policy. The
registry (:mod:`mobidfl.plugins`) imports this package on its first lookup (entry point
``mobidfl.plugins``); a policy's own settings are its ``settings_class``.
"""

from mobidfl.model.policies import cached as _cached  # noqa: F401 - imported to register the built-in policy
from mobidfl.model.policies import central_fedavg as _central_fedavg  # noqa: F401 - imported to register the built-in policy
from mobidfl.model.policies import defedavg as _defedavg  # noqa: F401 - imported to register the built-in policy
from mobidfl.model.policies import dpsgd as _dpsgd  # noqa: F401 - imported to register the built-in policy
from mobidfl.model.policies import fedavg_weighted as _fedavg_weighted  # noqa: F401 - imported to register the built-in policy
from mobidfl.model.policies import local as _local  # noqa: F401 - imported to register the built-in policy
from mobidfl.model.policies import mobility_aware as _mobility_aware  # noqa: F401 - imported to register the built-in policy
from mobidfl.model.policies import mofel as _mofel  # noqa: F401 - imported to register the built-in policy
from mobidfl.model.policies import psfl as _psfl  # noqa: F401 - imported to register the built-in policy
from mobidfl.model.policies.base import (
    POLICIES,
    AgentTable,
    Exchange,
    ExchangeContext,
    ExchangePolicy,
    Messages,
    apply_assignments,
    combine_rows,
    make_policy,
    register_policy,
)

__all__ = [
    "POLICIES",
    "AgentTable",
    "Exchange",
    "ExchangeContext",
    "ExchangePolicy",
    "Messages",
    "apply_assignments",
    "combine_rows",
    "make_policy",
    "register_policy",
]
