"""TOML values as text: the one writer behind ``config.toml`` and ``sweep.toml``.

The standard library reads TOML but does not write it; MobiDFL writes only flat tables of
scalars, so one small function covers it and both files read back to the same values.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["toml_value"]


def toml_value(value: Any) -> str:
    """One scalar as a TOML value (booleans, integers, floats with ``inf``, strings).

    Parameters
    ----------
    value
        A bool, int, float or anything else (written as its ``str`` in a basic string).

    Returns
    -------
    str
        Text that :mod:`tomllib` reads back to ``value`` (strings: every control
        character escaped, other characters as they are).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False).replace("\x7f", "\\u007f")
