"""An error answer for a request refused before a handler sees it (responses with a top-level error code).

Every response class starts with `error_code`; its other fields without defaults get the protocol's
"unknown" values (-1, False, empty, None), so a refusal never claims a leader, an epoch or a result.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from node.protocol.broker_api import SnapshotId
from node.protocol.registry import RESPONSE_FOR

_UNKNOWN_BY_TYPE: tuple[tuple[str, Any], ...] = (
    ("bool", False),
    ("int", -1),
    ("bytes", b""),
    ("tuple", ()),
    ("str | None", None),
    ("str", ""),
)


def _unknown(type_text: str) -> Any:
    if type_text == "SnapshotId":
        return SnapshotId(-1, -1)
    if "None" in type_text:
        return None
    for prefix, value in _UNKNOWN_BY_TYPE:
        if type_text.startswith(prefix):
            return value
    raise TypeError(f"no unknown value for a field of type {type_text}")


def error_response(request: object, error_code: int) -> object:
    """`request`'s response type carrying `error_code` and nothing else."""
    cls = RESPONSE_FOR[type(request)]
    if "error_code" not in {f.name for f in dataclasses.fields(cls)}:
        raise TypeError(f"{cls.__name__} has per-resource errors only; its handler must refuse it")
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name == "error_code":
            values[f.name] = int(error_code)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            values[f.name] = _unknown(str(f.type))
    return cls(**values)


__all__ = ["error_response"]
