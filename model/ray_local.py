"""Start Ray so that a local cluster listens on 127.0.0.1 only (sweeps and training workers).

A local Ray opens a dozen servers (GCS, raylet, object manager, workers, runtime-env agent).
``ray.init(_node_ip_address="127.0.0.1")`` alone does not keep them on the loopback: Ray
turns a loopback node address into the machine's outward address
(``ray._private.services.resolve_ip_for_localhost``) and its servers then listen on every
interface. With ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` Ray's own setting for a single-machine
"cluster" the node address stays 127.0.0.1 and every server binds there (checked with
psutil in tests/analysis/test_bad_inputs.py). The environment variable is read when ``ray`` is
imported, so the same value is also set on the imported module (``ray_constants``; the one
library shim here, listed in docs/reference/errors.md). A remote cluster (``address``) is
the user's choice and left as it is.
"""

from __future__ import annotations

import os
from typing import Any

LOOPBACK = "127.0.0.1"
SINGLE_MACHINE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def local_ray_env() -> None:
    """Make a Ray started by this process (and inherited by its servers) single-machine."""
    os.environ[SINGLE_MACHINE_ENV] = "0"
    constants = getattr(getattr(_imported_ray(), "_private", None), "ray_constants", None)
    if constants is not None and hasattr(constants, "ENABLE_RAY_CLUSTER"):
        constants.ENABLE_RAY_CLUSTER = False


def init_ray(ray: Any, *, address: str | None, **options: Any) -> None:
    """``ray.init``.

    A new local Ray on 127.0.0.1 only (no dashboard), or join ``address`` (a cluster on 127.0.0.1 is
    joined on the loopback, as it was started).

    A local Ray is asked for with ``address="local"``: ``None`` would join whatever
    cluster ``ray start`` (or a test's ``ray.cluster_utils.Cluster``) last recorded on this
    machine, with other jobs' runs and its own resources.
    """
    if address is None:
        local_ray_env()
        ray.init(address="local", _node_ip_address=LOOPBACK, include_dashboard=False,
                 dashboard_host=LOOPBACK, **options)
    elif address.rpartition(":")[0] in (LOOPBACK, "localhost"):  # a cluster on this machine
        local_ray_env()  # the driver's own servers stay on the loopback too
        ray.init(address=address, _node_ip_address=LOOPBACK, **options)
    else:
        ray.init(address=address, include_dashboard=False, **options)


def _imported_ray() -> Any:
    import sys

    return sys.modules.get("ray")
