"""MobiDFL core: the Mesa model, its configuration, learning engine and exchange policies.

The front door: ``from mobidfl.model import MobiDFLModel, Config``. Names are resolved lazily
(PEP 562), so importing a ground-floor module such as ``mobidfl.model.config`` runs this file
without importing the Mesa model above it. Errors have one home, :mod:`mobidfl.errors`.
"""

from __future__ import annotations

from typing import Any

from mobidfl.exports import resolve

_EXPORTS = {
    "MobiDFLModel": "mobidfl.model.world",
    "Config": "mobidfl.model.config",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return resolve(globals(), _EXPORTS, name)
