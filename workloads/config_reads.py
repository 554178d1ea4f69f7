"""The two user read paths of topic configs, as history completions.

- **At the controller** (`controller_read`): DescribeConfigs to the controller listeners; the active
  controller answers only after a read barrier (node/controller/controller.py `_describe_configs`),
  so the answer is linearizable. On this cluster "straight at the controller" and "the linearizable
  read barrier" are one path: a controller has no un-barriered config read.
- **At a broker** (`broker_read`): DescribeConfigs to one broker, answered from its metadata image: not
  linearizable, but it carries the `metadata_offset` it reflects. Its history value is
  `{"metadata_offset": o, "reads": [["r", key, value], ...]}`, the shape `checkers/image_reads.py`
  judges (the answer equals the committed log's image at o; a broker never goes backwards).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from vocab.invocation import Completion, DoneFn
from workloads.calls import Answer, Calls, failed
from workloads.config_requests import MissingValue, describe_request, described_values

BROKER_READ = "read-broker"

Decode = Callable[[str | None], Any]
Shape = Callable[[dict[str, str | None]], Any]  # the values read -> the completion's value


def _values(answer: Answer, keys: Sequence[str]) -> dict[str, str | None] | Completion:
    """The values read, or the completion that ends the op without them."""
    if answer.error is not None:
        return failed(answer.error, answer.node)
    try:
        return described_values(answer.response, keys)
    except MissingValue as exc:
        return Completion("fail", node=answer.node, error=str(exc))
    except Exception as exc:  # a resource's typed error
        return failed(exc, answer.node)


def controller_read(calls: Calls, keys: Sequence[str], shape: Shape, done: DoneFn) -> None:
    """Read `keys` at the active controller (linearizable); the completion's value is `shape(values)`."""

    def finish(answer: Answer) -> None:
        values = _values(answer, keys)
        done(values if isinstance(values, Completion) else Completion("ok", shape(values), node=answer.node))

    calls.to_controllers(describe_request(keys), idempotent=True, done=finish)


def broker_read(calls: Calls, node: str, keys: Sequence[str], decode: Decode, done: DoneFn) -> None:
    """Read `keys` from `node`'s metadata image; the value carries the offset the answer reflects."""

    def finish(answer: Answer) -> None:
        values = _values(answer, keys)
        if isinstance(values, Completion):
            done(values)
            return
        reads = [["r", key, decode(values[key])] for key in keys]
        done(Completion("ok", {"metadata_offset": answer.response.metadata_offset, "reads": reads}, node=node))

    calls.to_broker(node, describe_request(keys), idempotent=True, done=finish)


def image_read_invocation(keys: Sequence[str], node: str | None = None) -> dict[str, Any]:
    """A broker read's invoke value: the keys to read and, optionally, the broker to ask."""
    value: dict[str, Any] = {"reads": [["r", key, None] for key in keys]}
    if node is not None:
        value["node"] = node
    return value


def requested(value: Any) -> tuple[list[str], str | None]:
    """(keys, broker or None) of a broker read's invoke value."""
    keys = [mop[1] for mop in value["reads"]]
    return keys, value.get("node")
