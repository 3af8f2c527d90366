"""Import libpysal on first use, not when mesa-geo is imported.

WHY: ``mesa_geo.geospace`` runs ``from libpysal import weights`` at import time, and
libpysal's package imports its graph module, scikit-learn and ``scipy.stats`` with it: about
1.6 s of CPU in every interpreter that imports the Mesa model (a ``mobidfl`` command, each
sweep or Ray worker, the app's server). mesa-geo uses ``weights`` in one place,
``GeoSpace.get_neighbors`` on polygon layers, which MobiDFL's world never calls.

:func:`defer_libpysal` puts a stand-in module under the name ``libpysal`` whose
``weights`` is a stand-in too; the first real use of either (an attribute that is not
``weights``, or any attribute of ``weights``) imports the real libpysal and hands over to
it, so mesa-geo's neighbourhoods and a user's own ``import libpysal`` behave as without the
stand-in. ``import libpysal.<sub>`` works too (the stand-in carries the real package path).
Nothing is deferred when libpysal is already imported or not installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

#: The package deferred, and the names of its submodules that mesa-geo binds at import.
PACKAGE = "libpysal"
BOUND_AT_IMPORT = ("weights",)


class DeferredModule(types.ModuleType):
    """A stand-in for a module that imports the real one on first attribute use."""

    def __init__(self, name: str, *, path: list[str] | None = None) -> None:
        super().__init__(name)
        self.__deferred_path = path

    def __getattr__(self, name: str) -> Any:
        if name == "__path__" and self.__deferred_path is not None:
            return self.__deferred_path  # a submodule import finds its files, nothing more
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # introspection (inspect walks sys.modules) is no use
        if self.__name__ == PACKAGE and name in BOUND_AT_IMPORT:
            submodule = DeferredModule(f"{PACKAGE}.{name}")  # bound by ``from … import``
            setattr(self, name, submodule)
            return submodule
        return getattr(real_module(self.__name__), name)


def real_module(name: str) -> types.ModuleType:
    """The real module ``name``, importing its package for real first if it was deferred."""
    if isinstance(sys.modules.get(PACKAGE), DeferredModule):
        del sys.modules[PACKAGE]
    return importlib.import_module(name)


def defer_libpysal() -> bool:
    """Put the stand-in in place; ``True`` when libpysal is now deferred."""
    current = sys.modules.get(PACKAGE)
    if current is not None:
        return isinstance(current, DeferredModule)
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.submodule_search_locations is None:
        return False
    stand_in = DeferredModule(PACKAGE, path=list(spec.submodule_search_locations))
    stand_in.__spec__, stand_in.__file__ = spec, spec.origin
    sys.modules[PACKAGE] = stand_in
    return True


defer_libpysal()
