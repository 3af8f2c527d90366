"""Names a package re-exports, resolved on first use (PEP 562).

WHY: ``mobidfl``, ``mobidfl.model``, ``mobidfl.agents`` and ``mobidfl.analysis.app`` each
re-export names from the modules that implement them. Importing every one of those modules
when the package is imported would pull the Mesa model (and Solara, for the app) into code
that needs one small part, e.g. ``mobidfl.errors`` from ``maps/``. One function serves every
package's ``__getattr__``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, MutableMapping
from typing import Any


def resolve(namespace: MutableMapping[str, Any], exports: Mapping[str, str], name: str) -> Any:
    """``name`` from the module ``exports[name]``, kept in ``namespace``.

    ``namespace`` is the package's globals, so the next lookup is a plain attribute;
    ``AttributeError`` for a name not exported.
    """
    if name not in exports:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(exports[name]), name)
    namespace[name] = value
    return value
