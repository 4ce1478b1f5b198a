"""Value rules a request's numbers share, wherever they are read (the
gateway's query parameters, a service's request)."""

from __future__ import annotations

import math

from services.core.domain.errors import InvalidArgument


def finite_number(value: float, field: str) -> float:
    """A number that is neither infinite nor NaN."""
    if not math.isfinite(value):
        raise InvalidArgument("NOT_A_NUMBER", f"'{field}' must be a finite number", field=field)
    return value
