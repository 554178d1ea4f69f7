"""Structure-aware inputs: a valid message of any schema, then mutations of its fields and bytes.

`sample` builds a message the codec encodes, walking the schema (node.protocol.fields), with values
biased towards small ids and epochs so that requests hit the node's real code paths; `mutate_value`
replaces one leaf with a value at its wire type's edges (0, -1, the int32/int64 limits, huge
strings, empty and nested arrays); `mutate_bytes` then damages the encoded frame itself (flips,
cuts, splices, lengths and header fields overwritten). Everything is drawn from one `random.Random`,
so a seed replays a run exactly.
"""

from __future__ import annotations

import dataclasses
import random
import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from node.protocol.errors import ErrorCode
from node.protocol.fields import SCHEMAS_BY_CLASS, Array, Batches, Bytes, Fixed, OptionalStruct, Pair, String, Struct
from node.raft.records import RecordBatch

INT_EDGES: dict[str, tuple[int, ...]] = {
    "b": (0, 1, -1, 2, 127, -128),
    "h": (0, 1, -1, 32767, -32768, 255),
    "H": (0, 1, 65535, 65534),
    "i": (0, 1, -1, 2, 3, 2**31 - 1, -(2**31), 2**31 - 2, 65536),
    "q": (0, 1, -1, 2**63 - 1, -(2**63), 2**63 - 2, 2**31, 2**32),
}
_RANGES = {
    "b": (-128, 127),
    "h": (-32768, 32767),
    "H": (0, 65535),
    "i": (-(2**31), 2**31 - 1),
    "q": (-(2**63), 2**63 - 1),
}
_STRINGS = ("", "a", "topic", "User:ANONYMOUS", "\u00e9\u4e2d", "x" * 300, "..", "__cluster_metadata", "\x00")


def _small_int(rng: random.Random, code: str) -> int:
    if rng.random() < 0.1:
        return rng.choice(INT_EDGES[code])
    lo, hi = _RANGES[code]
    return max(lo, min(hi, rng.randint(0, 5) if rng.random() < 0.8 else rng.randint(-1, 100)))


Hints = Mapping[str, Callable[[random.Random], Any]]


def sample(cls: type, rng: random.Random, depth: int = 0, hints: Hints | None = None) -> Any:
    """A message (or nested struct) of `cls` with plausible values for every field of its schema.

    `hints` gives values for fields by `"Class.field"` or `"field"` (a topic id the node knows, a
    broker epoch it holds), or whole messages by `"Class"` (fields that must agree, as a broker's id
    and its epoch): taken 70% of the time, so that requests meet the node's state."""
    schema = SCHEMAS_BY_CLASS[cls]
    whole = hints.get(cls.__name__) if hints else None
    if whole is not None and rng.random() < 0.7:
        return whole(rng)
    if not hints:
        return cls(*[sample_field(ftype, rng, depth) for _, ftype in schema.fields])
    values = []
    for name, ftype in schema.fields:
        hint = hints.get(f"{cls.__name__}.{name}") or hints.get(name)
        if hint is not None and rng.random() < 0.7:
            values.append(hint(rng))
        else:
            values.append(sample_field(ftype, rng, depth, hints))
    return cls(*values)


def sample_field(ftype: Any, rng: random.Random, depth: int, hints: Hints | None = None) -> Any:
    match ftype:
        case Fixed() if ftype.enum is not None:
            return rng.choice([m for m in ftype.enum if m.name != "UNKNOWN"] or list(ftype.enum))
        case Fixed() if ftype.name == "bool":
            return rng.random() < 0.5
        case Fixed() if ftype.name == "error code":
            return int(rng.choice(list(ErrorCode)))
        case Fixed() if ftype.name == "uuid":
            return uuid.UUID(int=rng.getrandbits(128))
        case Fixed():
            return _small_int(rng, ftype.code)
        case String():
            if ftype.nullable and rng.random() < 0.3:
                return None
            return rng.choice(_STRINGS[:5])
        case Bytes():
            if ftype.nullable and rng.random() < 0.2:
                return None
            return rng.randbytes(rng.randint(0, 16))
        case Array():
            if ftype.nullable and rng.random() < 0.1:
                return None
            n = 0 if depth > 3 else rng.randint(0, 3)
            return tuple(sample_field(ftype.elem, rng, depth + 1, hints) for _ in range(n))
        case Pair():
            return (sample_field(ftype.key, rng, depth + 1, hints), sample_field(ftype.value, rng, depth + 1, hints))
        case OptionalStruct():
            return None if rng.random() < 0.3 or depth > 3 else sample(ftype.schema.cls, rng, depth + 1, hints)
        case Struct():
            return sample(ftype.schema.cls, rng, depth + 1, hints)
        case Batches():
            return tuple(sample_batches(rng, rng.randint(0, 2)))
    raise TypeError(f"no sampler for field type {ftype!r}")


def sample_batches(rng: random.Random, n: int, base: int = 0) -> list[RecordBatch]:
    out = []
    for _ in range(n):
        records = tuple(rng.randbytes(rng.randint(0, 24)) for _ in range(rng.randint(1, 3)))
        epoch = rng.choice((0, 1, 1, 2, 2**31 - 1, 5))
        out.append(RecordBatch(base, epoch, records, control=rng.random() < 0.1, timestamp_ms=rng.randint(0, 10**6)))
        base += len(records)
    return out


def _edge_for(ftype: Any, rng: random.Random, depth: int) -> Any:
    match ftype:
        case Fixed() if ftype.code in INT_EDGES and ftype.check is None:
            return rng.choice(INT_EDGES[ftype.code])
        case String():
            return rng.choice((*_STRINGS, "y" * rng.choice((1000, 40000)), None if ftype.nullable else ""))
        case Bytes():
            return rng.randbytes(rng.choice((0, 1, 1000, 70000)))
        case Array():
            n = 1000 if rng.random() < 0.03 else rng.choice((0, 1, 2, 50))  # big ones are slow: rare
            elem = sample_field(ftype.elem, rng, depth + 1) if n else None
            return tuple(elem for _ in range(n)) if n <= 50 else tuple([elem] * n)
    return sample_field(ftype, rng, depth)


def mutate_value(msg: Any, rng: random.Random, depth: int = 0) -> Any:
    """`msg` with one leaf (or one whole array) replaced by an edge value of its wire type."""
    schema = SCHEMAS_BY_CLASS.get(type(msg))
    if schema is None or not schema.fields:
        return msg
    name, ftype = rng.choice(schema.fields)
    current = getattr(msg, name)
    if isinstance(ftype, Struct) and current is not None and rng.random() < 0.6:
        new = mutate_value(current, rng, depth + 1)
    elif isinstance(ftype, Array) and current and rng.random() < 0.5 and isinstance(ftype.elem, Struct):
        items = list(current)
        i = rng.randrange(len(items))
        items[i] = mutate_value(items[i], rng, depth + 1)
        new = tuple(items)
    else:
        new = _edge_for(ftype, rng, depth)
    return dataclasses.replace(msg, **{name: new})


_HEADER_FIELDS = ((4, ">h"), (6, ">h"), (8, ">i"), (12, ">b"))  # api_key, version, correlation id, flags


def mutate_bytes(frame: bytes, rng: random.Random) -> bytes:
    """One byte-level damage to an encoded frame (length prefix kept right unless that is the damage)."""
    data = bytearray(frame)
    choice = rng.randrange(8)
    if choice == 0 and len(data) > 4:  # flip bits
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(4, len(data))
            data[i] ^= 1 << rng.randrange(8)
    elif choice == 1 and len(data) > 13:  # cut the body short (and say so in the length)
        data = data[: rng.randint(4, len(data) - 1)]
    elif choice == 2:  # append garbage
        data += rng.randbytes(rng.randint(1, 64))
    elif choice == 3 and len(data) > 13:  # overwrite an aligned int with an edge value
        code = rng.choice(("i", "h", "q"))
        width = struct.calcsize(">" + code)
        if len(data) - width > 13:
            pos = rng.randrange(13, len(data) - width + 1)
            struct.pack_into(">" + code, data, pos, rng.choice(INT_EDGES[code]))
    elif choice == 4:  # a header field
        pos, fmt = rng.choice(_HEADER_FIELDS)
        if pos + struct.calcsize(fmt) <= len(data):
            struct.pack_into(fmt, data, pos, rng.choice(INT_EDGES[fmt[-1]]))
    elif choice == 5 and len(data) > 14:  # duplicate a slice (splice)
        a = rng.randrange(13, len(data))
        b = rng.randrange(a, min(len(data), a + 32) + 1)
        data[a:a] = data[a:b]
    elif choice == 6:  # a wrong length prefix, left wrong
        struct.pack_into(">i", data, 0, rng.choice(INT_EDGES["i"]))
        return bytes(data)
    else:  # random bytes in the body
        for _ in range(rng.randint(1, 8)):
            if len(data) > 13:
                data[rng.randrange(13, len(data))] = rng.randrange(256)
    if choice != 6 and len(data) >= 4:
        struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


def mutate_file(raw: bytes, rng: random.Random) -> bytes:
    """One damage to a file's bytes: flips, a cut tail, garbage appended, an int overwritten."""
    data = bytearray(raw)
    choice = rng.randrange(5)
    if choice == 0 and data:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif choice == 1 and data:
        data = data[: rng.randrange(len(data))]
    elif choice == 2:
        data += rng.randbytes(rng.randint(1, 100))
    elif choice == 3 and len(data) >= 8:
        code = rng.choice(("i", "q", "h"))
        width = struct.calcsize(">" + code)
        pos = rng.randrange(0, len(data) - width + 1)
        struct.pack_into(">" + code, data, pos, rng.choice(INT_EDGES[code]))
    elif data:
        a = rng.randrange(len(data))
        data[a:a] = data[a : a + rng.randint(1, 40)]
    return bytes(data)
