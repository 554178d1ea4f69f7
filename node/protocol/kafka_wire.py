"""Kafka's wire encoding, driven by message layouts written the way Kafka's JSON definitions read.

A `Message` lists its `Field`s with the versions each appears in and the versions it may be null in;
`flexible` is the first version that uses KIP-482's compact encodings (unsigned-varint lengths + 1,
0 for null) and ends every struct with a tagged-field section. Decoding gives plain dicts (keys are
Kafka's field names), encoding takes them; a missing key is the field's default. Unknown tagged fields
are skipped on read (that is what they are for); none are written.

Pure: no I/O. Every decoding fault raises `FrameError` with a one-line reason.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any

from node.protocol.fields import FrameError

_INT = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"),
}
NO_VERSIONS = (1, 0)  # an empty range


def versions(spec: str) -> tuple[int, int]:
    """Kafka's version-range notation: "3+", "0-5", "7", or "" for none."""
    if not spec:
        return NO_VERSIONS
    if spec.endswith("+"):
        return int(spec[:-1]), 1 << 15
    lo, _, hi = spec.partition("-")
    return int(lo), int(hi or lo)


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: str  # int8..int64, bool, string, bytes, uuid, []int32, []string; "[]" or "{}" (struct) with `fields`
    versions: tuple[int, int]
    nullable: tuple[int, int] = NO_VERSIONS
    fields: tuple[Field, ...] = ()
    default: Any = None

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def null_ok(self, version: int) -> bool:
        return self.nullable[0] <= version <= self.nullable[1]


def F(
    name: str, type_: str, vers: str = "0+", nullable: str = "", fields: tuple[Field, ...] = (), default: Any = None
) -> Field:
    return Field(name, type_, versions(vers), versions(nullable), fields, default)


@dataclass(frozen=True, slots=True)
class Message:
    api_key: int
    name: str
    served: tuple[int, int]  # the versions this cluster answers (a subset of Kafka's valid ones)
    flexible: int  # first flexible version
    fields: tuple[Field, ...]

    def is_flexible(self, version: int) -> bool:
        return version >= self.flexible

    def serves(self, version: int) -> bool:
        return self.served[0] <= version <= self.served[1]


def _default(field: Field, version: int) -> Any:
    if field.default is not None:
        return field.default
    if field.null_ok(version):
        return None
    if field.type.startswith("[]"):
        return []
    return {"bool": False, "string": "", "bytes": b"", "uuid": uuid.UUID(int=0)}.get(field.type, 0)


class Reader:
    def __init__(self, data: bytes | memoryview, pos: int = 0) -> None:
        self.data = memoryview(data)
        self.pos = pos

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise FrameError(f"truncated: wanted {n} bytes at offset {self.pos}, frame has {len(self.data)}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int(self, kind: str) -> int:
        s = _INT[kind]
        return s.unpack(self.take(s.size))[0]

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            (b,) = self.take(1)
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise FrameError(f"unsigned varint longer than 5 bytes at offset {self.pos}")

    def length(self, compact: bool) -> int:
        """A string/array length; -1 for null."""
        n = self.uvarint() - 1 if compact else self.int("int32")
        if n < -1:
            raise FrameError(f"negative length {n} at offset {self.pos}")
        return n

    def string(self, compact: bool) -> str | None:
        n = self.uvarint() - 1 if compact else self.int("int16")
        if n < 0:
            return None
        try:
            return bytes(self.take(n)).decode()
        except UnicodeDecodeError:
            raise FrameError(f"string at offset {self.pos - n} is not UTF-8") from None

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())


class Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def int(self, kind: str, value: int) -> None:
        self.out += _INT[kind].pack(value)

    def uvarint(self, value: int) -> None:
        while value >= 0x80:
            self.out.append((value & 0x7F) | 0x80)
            value >>= 7
        self.out.append(value)

    def length(self, n: int, compact: bool) -> None:
        if compact:
            self.uvarint(n + 1)
        else:
            self.int("int32", n)

    def string(self, value: str | None, compact: bool) -> None:
        if value is None:
            self.uvarint(0) if compact else self.int("int16", -1)
            return
        raw = value.encode()
        self.uvarint(len(raw) + 1) if compact else self.int("int16", len(raw))
        self.out += raw


def _read_value(r: Reader, type_: str, compact: bool) -> Any:
    if type_ in _INT:
        return r.int(type_)
    if type_ == "bool":
        (b,) = r.take(1)
        if b > 1:
            raise FrameError(f"boolean {b} at offset {r.pos - 1}")
        return bool(b)
    if type_ == "string":
        return r.string(compact)
    if type_ == "uuid":
        return uuid.UUID(bytes=bytes(r.take(16)))
    if type_ == "bytes":
        n = r.length(compact)
        return None if n < 0 else bytes(r.take(n))
    raise FrameError(f"no reader for {type_}")  # a layout bug, reported like bad input


def _write_value(w: Writer, type_: str, value: Any, compact: bool) -> None:
    if type_ in _INT:
        w.int(type_, int(value))
    elif type_ == "bool":
        w.out.append(1 if value else 0)
    elif type_ == "string":
        w.string(value, compact)
    elif type_ == "uuid":
        w.out += value.bytes
    elif type_ == "bytes":
        w.length(-1 if value is None else len(value), compact)
        w.out += value or b""
    else:
        raise TypeError(f"no writer for {type_}")


def read_struct(r: Reader, fields: tuple[Field, ...], version: int, flexible: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        if not f.present(version):
            out[f.name] = _default(f, version)
            continue
        if f.type == "{}":  # a struct, nullable ones behind an int8 marker (-1 null, 1 present)
            if f.null_ok(version) and r.int("int8") < 0:
                out[f.name] = None
            else:
                out[f.name] = read_struct(r, f.fields, version, flexible)
            continue
        if f.type.startswith("[]"):
            n = r.length(flexible)
            if n < 0:
                if not f.null_ok(version):
                    raise FrameError(f"{f.name} is null in version {version}, where it may not be")
                out[f.name] = None
                continue
            if n > len(r.data) - r.pos:
                raise FrameError(f"{f.name}: {n} elements cannot fit in the {len(r.data) - r.pos} bytes left")
            if f.fields:
                out[f.name] = [read_struct(r, f.fields, version, flexible) for _ in range(n)]
            else:
                out[f.name] = [_read_value(r, f.type[2:], flexible) for _ in range(n)]
        else:
            value = _read_value(r, f.type, flexible)
            if value is None and not f.null_ok(version):
                raise FrameError(f"{f.name} is null in version {version}, where it may not be")
            out[f.name] = value
    if flexible:
        r.tagged_fields()
    return out


def write_struct(w: Writer, fields: tuple[Field, ...], values: dict[str, Any], version: int, flexible: bool) -> None:
    for f in fields:
        if not f.present(version):
            continue
        value = values.get(f.name, _default(f, version))
        if value is None and not f.null_ok(version):
            value = _default(Field(f.name, f.type, f.versions, NO_VERSIONS, f.fields, f.default), version)
        if f.type == "{}":
            if f.null_ok(version):
                w.int("int8", -1 if value is None else 1)
            if value is not None:
                write_struct(w, f.fields, value, version, flexible)
            continue
        if f.type.startswith("[]"):
            if value is None:
                w.length(-1, flexible)
                continue
            w.length(len(value), flexible)
            for item in value:
                if f.fields:
                    write_struct(w, f.fields, item, version, flexible)
                else:
                    _write_value(w, f.type[2:], item, flexible)
        else:
            _write_value(w, f.type, value, flexible)
    if flexible:
        w.uvarint(0)  # no tagged fields


def decode_body(msg: Message, version: int, r: Reader) -> dict[str, Any]:
    """Bytes after the body are ignored, as Kafka's broker ignores them: librdkafka's Metadata v9+
    request for every topic carries three (a null array written into a 4-byte placeholder)."""
    return read_struct(r, msg.fields, version, msg.is_flexible(version))


def encode_body(msg: Message, version: int, values: dict[str, Any]) -> bytes:
    w = Writer()
    write_struct(w, msg.fields, values, version, msg.is_flexible(version))
    return bytes(w.out)


__all__ = ["F", "Field", "Message", "Reader", "Writer", "decode_body", "encode_body", "versions"]
