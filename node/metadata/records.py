"""The metadata records of KIP-631 and their compact binary encoding.

A metadata record is the payload of one entry of a raft data batch: one admin request becomes one
list of records, appended as one atomic batch. Field names are Kafka's, in snake_case; record type
numbers are Kafka's metadata `apiKey`s, so a dump reads like Kafka's `kafka-dump-log --cluster-metadata`.

Encoding (big-endian), chosen for speed and a canonical form (equal records, equal bytes):

    record_type int16, version int16, then the fields in declaration order:
    int8/int16/int32/int64   fixed width
    bool                     int8, exactly 0 or 1
    uuid                     16 bytes (the dataclass holds the canonical lowercase string)
    string                   int32 byte length (-1 = null, where nullable), UTF-8
    int32 array              int32 count (-1 = null, where nullable), then the elements
    optional scalar          int8 presence flag (0 = null / unchanged), then the value
    endpoints, features      int32 count, then each entry's fields; features sorted by name

Decoding anything that is not such a record raises `MetadataRecordError` and nothing else.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import IntEnum
from typing import Any, ClassVar, NamedTuple


class MetadataRecordError(ValueError):
    """A record that cannot be encoded, or bytes that are not a metadata record."""


# --- Kafka's enumerations (config resource types and ACL enums live in node.protocol) ---------------


class SecurityProtocol(IntEnum):
    PLAINTEXT = 0
    SSL = 1
    SASL_PLAINTEXT = 2
    SASL_SSL = 3


NO_LEADER = -1


class BrokerEndpoint(NamedTuple):
    name: str
    host: str
    port: int
    security_protocol: int


# --- field codecs --------------------------------------------------------------------------------


class _Fixed:
    """A fixed-width field: consecutive ones are packed with one struct call."""

    __slots__ = ("fmt", "from_wire", "to_wire")

    def __init__(
        self, fmt: str, to_wire: Callable[[Any], Any] | None = None, from_wire: Callable[[Any], Any] | None = None
    ) -> None:
        self.fmt = fmt
        self.to_wire = to_wire
        self.from_wire = from_wire


class _Var:
    """A variable-width field: `enc(value, parts)` appends bytes; `dec(buf, pos)` returns (value, pos)."""

    __slots__ = ("dec", "enc")

    def __init__(self, enc: Callable[[Any, list[bytes]], None], dec: Callable[[bytes, int], tuple[Any, int]]) -> None:
        self.enc = enc
        self.dec = dec


_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_FEATURE = struct.Struct(">hh")
_PORT_PROTO = struct.Struct(">Hh")


def _uuid_to_wire(value: str) -> bytes:
    try:
        raw = bytes.fromhex(value.replace("-", ""))
    except (ValueError, AttributeError):
        raise MetadataRecordError(f"not a UUID: {value!r}") from None
    if len(raw) != 16 or _uuid_from_wire(raw) != value:
        raise MetadataRecordError(f"not a canonical lowercase UUID: {value!r}")
    return raw


def _uuid_from_wire(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _bool_from_wire(value: int) -> bool:
    if value == 0:
        return False
    if value == 1:
        return True
    raise MetadataRecordError(f"boolean byte {value}")


I8 = _Fixed("b")
I16 = _Fixed("h")
I32 = _Fixed("i")
I64 = _Fixed("q")
BOOL = _Fixed("b", lambda v: 1 if v else 0, _bool_from_wire)
UUID = _Fixed("16s", _uuid_to_wire, _uuid_from_wire)


def _read_len(buf: bytes, pos: int, nullable: bool, what: str) -> tuple[int, int]:
    (n,) = _I32.unpack_from(buf, pos)
    if n < (-1 if nullable else 0):
        raise MetadataRecordError(f"bad {what} length {n} at byte {pos}")
    return n, pos + 4


def _string(nullable: bool) -> _Var:
    def enc(value: str | None, parts: list[bytes]) -> None:
        if value is None:
            if not nullable:
                raise MetadataRecordError("null in a non-nullable string field")
            parts.append(b"\xff\xff\xff\xff")
            return
        raw = value.encode()
        parts.append(_I32.pack(len(raw)))
        parts.append(raw)

    def dec(buf: bytes, pos: int) -> tuple[str | None, int]:
        n, pos = _read_len(buf, pos, nullable, "string")
        if n < 0:
            return None, pos
        end = pos + n
        if end > len(buf):
            raise MetadataRecordError(f"string of {n} bytes overruns the record at byte {pos}")
        return str(buf[pos:end], "utf-8"), end

    return _Var(enc, dec)


_SMALL_ARRAYS = tuple(struct.Struct(f">{n}i") for n in range(64))


def _int32_array(nullable: bool) -> _Var:
    lowest = -1 if nullable else 0

    def enc(value: Sequence[int] | None, parts: list[bytes]) -> None:
        if value is None:
            if not nullable:
                raise MetadataRecordError("null in a non-nullable array field")
            parts.append(b"\xff\xff\xff\xff")
            return
        parts.append(struct.pack(f">i{len(value)}i", len(value), *value))

    def dec(buf: bytes, pos: int) -> tuple[tuple[int, ...] | None, int]:
        n = _I32.unpack_from(buf, pos)[0]
        pos += 4
        if n <= 0:
            if n == 0:
                return (), pos
            if n < lowest:
                raise MetadataRecordError(f"bad array length {n} at byte {pos - 4}")
            return None, pos
        end = pos + 4 * n
        if end > len(buf):
            raise MetadataRecordError(f"array of {n} elements overruns the record at byte {pos}")
        unpacker = _SMALL_ARRAYS[n] if n < 64 else struct.Struct(f">{n}i")
        return unpacker.unpack_from(buf, pos), end

    return _Var(enc, dec)


def _optional(inner: _Fixed) -> _Var:
    """A presence flag, then the value: None means "unchanged" in a change record."""
    packer = struct.Struct(">b" + inner.fmt)

    def enc(value: Any, parts: list[bytes]) -> None:
        if value is None:
            parts.append(b"\x00")
        else:
            parts.append(packer.pack(1, inner.to_wire(value) if inner.to_wire else value))

    def dec(buf: bytes, pos: int) -> tuple[Any, int]:
        flag = buf[pos]
        if flag == 0:
            return None, pos + 1
        if flag != 1:
            raise MetadataRecordError(f"presence flag {flag} at byte {pos}")
        _, value = packer.unpack_from(buf, pos)
        return (inner.from_wire(value) if inner.from_wire else value), pos + packer.size

    return _Var(enc, dec)


_STR = _string(False)


def _enc_endpoints(value: Sequence[BrokerEndpoint], parts: list[bytes]) -> None:
    parts.append(_I32.pack(len(value)))
    for name, host, port, protocol in value:
        _STR.enc(name, parts)
        _STR.enc(host, parts)
        parts.append(_PORT_PROTO.pack(port, protocol))


def _dec_endpoints(buf: bytes, pos: int) -> tuple[tuple[BrokerEndpoint, ...], int]:
    n, pos = _read_len(buf, pos, False, "endpoint list")
    out = []
    for _ in range(n):
        name, pos = _STR.dec(buf, pos)
        host, pos = _STR.dec(buf, pos)
        port, protocol = _PORT_PROTO.unpack_from(buf, pos)
        pos += _PORT_PROTO.size
        out.append(BrokerEndpoint(name, host, port, protocol))
    return tuple(out), pos


def _enc_features(value: Mapping[str, tuple[int, int]], parts: list[bytes]) -> None:
    parts.append(_I32.pack(len(value)))
    for name in sorted(value):
        low, high = value[name]
        _STR.enc(name, parts)
        parts.append(_FEATURE.pack(low, high))


def _dec_features(buf: bytes, pos: int) -> tuple[dict[str, tuple[int, int]], int]:
    n, pos = _read_len(buf, pos, False, "feature list")
    out: dict[str, tuple[int, int]] = {}
    previous = None
    for _ in range(n):
        name, pos = _STR.dec(buf, pos)
        if previous is not None and name <= previous:
            raise MetadataRecordError(f"features not sorted by name at byte {pos}")
        previous = name
        out[name] = _FEATURE.unpack_from(buf, pos)
        pos += _FEATURE.size
    return out, pos


STRING = _STR
NULLABLE_STRING = _string(True)
INT32_ARRAY = _int32_array(False)
NULLABLE_INT32_ARRAY = _int32_array(True)
OPTIONAL_INT32 = _optional(I32)
OPTIONAL_BOOL = _optional(BOOL)
ENDPOINTS = _Var(_enc_endpoints, _dec_endpoints)
FEATURES = _Var(_enc_features, _dec_features)

_Codec = _Fixed | _Var


class _Layout:
    """A record type's codec, compiled once into two straight-line functions (as `dataclasses` does).

    Runs of consecutive fixed-width fields become one struct call each; the generated code has no
    per-field dispatch, which makes encode/decode several times faster than a generic loop.
    """

    def __init__(self, cls: type, names: Sequence[str], codecs: Sequence[_Codec]) -> None:
        env: dict[str, Any] = {"cls": cls}
        enc = ["def encode(r, parts):"]
        dec = ["def decode(buf, pos):"]
        i = 0
        while i < len(codecs):
            codec = codecs[i]
            if isinstance(codec, _Var):
                env[f"c{i}"] = codec
                enc.append(f"    c{i}.enc(r.{names[i]}, parts)")
                dec.append(f"    v{i}, pos = c{i}.dec(buf, pos)")
                i += 1
                continue
            j = i
            while j < len(codecs) and isinstance(codecs[j], _Fixed):
                j += 1
            run = range(i, j)
            env[f"s{i}"] = packer = struct.Struct(">" + "".join(codecs[k].fmt for k in run))  # type: ignore[union-attr]
            wire = []
            for k in run:
                fixed = codecs[k]
                assert isinstance(fixed, _Fixed)
                env[f"t{k}"], env[f"f{k}"] = fixed.to_wire, fixed.from_wire
                wire.append(f"t{k}(r.{names[k]})" if fixed.to_wire else f"r.{names[k]}")
            enc.append(f"    parts.append(s{i}.pack({', '.join(wire)}))")
            dec.append(f"    {''.join(f'v{k}, ' for k in run)}= s{i}.unpack_from(buf, pos)")
            dec.append(f"    pos += {packer.size}")
            dec.extend(f"    v{k} = f{k}(v{k})" for k in run if codecs[k].from_wire)  # type: ignore[union-attr]
            i = j
        dec.append(f"    return cls({', '.join(f'v{k}' for k in range(len(codecs)))}), pos")
        exec("\n".join(enc) + "\n\n" + "\n".join(dec), env)
        self.encode: Callable[[Any, list[bytes]], None] = env["encode"]
        self.decode: Callable[[bytes, int], tuple[Any, int]] = env["decode"]


# --- the records ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    """A broker registered; `broker_epoch` is the offset of this record (the controller sets it)."""

    API_KEY: ClassVar[int] = 0
    VERSION: ClassVar[int] = 0
    FIELDS: ClassVar[tuple[_Codec, ...]] = (I32, UUID, I64, ENDPOINTS, FEATURES, NULLABLE_STRING, BOOL, BOOL)
    broker_id: int
    incarnation_id: str
    broker_epoch: int
    endpoints: tuple[BrokerEndpoint, ...] = ()
    features: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    API_KEY: ClassVar[int] = 1
    VERSION: ClassVar[int] = 0
    FIELDS: ClassVar[tuple[_Codec, ...]] = (I32, I64)
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class TopicRecord:
    API_KEY: ClassVar[int] = 2
    VERSION: ClassVar[int] = 0
    FIELDS: ClassVar[tuple[_Codec, ...]] = (STRING, UUID)
    name: str
    topic_id: str


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """A partition's full state: written on creation and in snapshots."""

    API_KEY: ClassVar[int] = 3
    VERSION: ClassVar[int] = 0
    FIELDS: ClassVar[tuple[_Codec, ...]] = (
        I32,
        UUID,
        INT32_ARRAY,
        INT32_ARRAY,
        INT32_ARRAY,
        INT32_ARRAY,
        I32,
        I32,
        I32,
    )
    partition_id: int
    topic_id: str
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    """Set (or, with `value` None, delete) one config key of a topic or broker ("" = cluster default)."""

    API_KEY: ClassVar[int] = 4
    VERSION: ClassVar[int] = 0
    FIELDS: ClassVar[tuple[_Codec, ...]] = (I8, STRING, STRING, NULLABLE_STRING)
    resource_type: int
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """KIP-631's IsrChangeRecord generalised (Kafka's PartitionChangeRecord): None = unchanged.

    Replaying it bumps `partition_epoch` (KIP-497's zkVersion) always, and `leader_epoch` whenever
    `leader` is present, as Kafka does: the controller writes `leader` only to change it (or to fence
    a zombie leader by bumping its epoch).
    """

    API_KEY: ClassVar[int] = 5
    VERSION: ClassVar[int] = 0
    FIELDS: ClassVar[tuple[_Codec, ...]] = (
        I32,
        UUID,
        NULLABLE_INT32_ARRAY,
        OPTIONAL_INT32,
        NULLABLE_INT32_ARRAY,
        NULLABLE_INT32_ARRAY,
        NULLABLE_INT32_ARRAY,
    )
    partition_id: int
    topic_id: str
    isr: tuple[int, ...] | None = None
    leader: int | None = None
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class FenceBrokerRecord:
    """The broker is fenced. It does not by itself leave any ISR: the controller writes those changes."""

    API_KEY: ClassVar[int] = 7
    VERSION: ClassVar[int] = 0
    FIELDS: ClassVar[tuple[_Codec, ...]] = (I32, I64)
    id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class UnfenceBrokerRecord:
    API_KEY: ClassVar[int] = 8
    VERSION: ClassVar[int] = 0
    FIELDS: ClassVar[tuple[_Codec, ...]] = (I32, I64)
    id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    """The topic, its partitions and its configs are gone."""

    API_KEY: ClassVar[int] = 9
    VERSION: ClassVar[int] = 0
    FIELDS: ClassVar[tuple[_Codec, ...]] = (UUID,)
    topic_id: str


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    """The finalized level of a feature; level 0 removes it (as in Kafka)."""

    API_KEY: ClassVar[int] = 12
    VERSION: ClassVar[int] = 0
    FIELDS: ClassVar[tuple[_Codec, ...]] = (STRING, I16)
    name: str
    feature_level: int


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    """Fence/unfence and controlled-shutdown state in one record (Kafka's); None = unchanged.

    Controlled shutdown must survive a controller failover, so it lives in the log, not in memory.
    """

    API_KEY: ClassVar[int] = 17
    VERSION: ClassVar[int] = 0
    FIELDS: ClassVar[tuple[_Codec, ...]] = (I32, I64, OPTIONAL_BOOL, OPTIONAL_BOOL)
    broker_id: int
    broker_epoch: int
    fenced: bool | None = None
    in_controlled_shutdown: bool | None = None


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    API_KEY: ClassVar[int] = 18
    VERSION: ClassVar[int] = 0
    FIELDS: ClassVar[tuple[_Codec, ...]] = (UUID, I8, STRING, I8, STRING, STRING, I8, I8)
    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    API_KEY: ClassVar[int] = 19
    VERSION: ClassVar[int] = 0
    FIELDS: ClassVar[tuple[_Codec, ...]] = (UUID,)
    id: str


MetadataRecord = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | TopicRecord
    | PartitionRecord
    | ConfigRecord
    | PartitionChangeRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | RemoveTopicRecord
    | FeatureLevelRecord
    | BrokerRegistrationChangeRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
)

RECORD_TYPES: tuple[type, ...] = (
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
    TopicRecord,
    PartitionRecord,
    ConfigRecord,
    PartitionChangeRecord,
    FenceBrokerRecord,
    UnfenceBrokerRecord,
    RemoveTopicRecord,
    FeatureLevelRecord,
    BrokerRegistrationChangeRecord,
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
)

_HEADER = struct.Struct(">hh")
_LAYOUTS: dict[type, _Layout] = {}
_BY_KEY: dict[int, tuple[type, _Layout]] = {}
for _cls in RECORD_TYPES:
    _names = [f.name for f in fields(_cls)]
    assert len(_names) == len(_cls.FIELDS), _cls.__name__
    _LAYOUTS[_cls] = _Layout(_cls, _names, _cls.FIELDS)
    _BY_KEY[_cls.API_KEY] = (_cls, _LAYOUTS[_cls])


def encode_record(record: MetadataRecord) -> bytes:
    layout = _LAYOUTS.get(type(record))
    if layout is None:
        raise MetadataRecordError(f"not a metadata record: {type(record).__name__}")
    parts = [_HEADER.pack(record.API_KEY, record.VERSION)]
    try:
        layout.encode(record, parts)
    except MetadataRecordError as exc:
        raise MetadataRecordError(f"cannot encode {type(record).__name__}: {exc}") from None
    except (struct.error, TypeError, ValueError, AttributeError, UnicodeError) as exc:
        raise MetadataRecordError(f"cannot encode {type(record).__name__}: {exc}") from None
    return b"".join(parts)


def decode_record(data: bytes | bytearray | memoryview) -> MetadataRecord:
    """Decode one record; any defect (short, unknown type/version, trailing bytes) is a MetadataRecordError."""
    buf = bytes(data)
    try:
        record_type, version = _HEADER.unpack_from(buf)
        entry = _BY_KEY.get(record_type)
        if entry is None:
            raise MetadataRecordError(f"unknown metadata record type {record_type}")
        cls, layout = entry
        if version != cls.VERSION:
            raise MetadataRecordError(f"{cls.__name__} version {version} is not supported (knows {cls.VERSION})")
        record, pos = layout.decode(buf, _HEADER.size)
    except MetadataRecordError:
        raise
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        raise MetadataRecordError(f"malformed metadata record ({len(buf)} bytes): {exc}") from None
    if pos != len(buf):
        raise MetadataRecordError(f"{cls.__name__} has {len(buf) - pos} trailing bytes")
    return record


def encode_records(records: Iterable[MetadataRecord]) -> tuple[bytes, ...]:
    """The `records` of one raft data batch: one admin request, one atomic batch."""
    return tuple(encode_record(r) for r in records)


def decode_records(payloads: Iterable[bytes]) -> list[MetadataRecord]:
    return [decode_record(p) for p in payloads]
