"""Field encodings of the binary frame format, and schemas compiled from them.

A schema is a message's field list, `(name, field type)` in the dataclass's declaration order; it is
checked against the dataclass when it is defined, so a message and its wire layout cannot drift.

Encodings (big-endian):
    int8/int16/int32/int64, uint16     fixed width
    bool                               int8 0|1 (anything else is a FrameError)
    error code                         int16, must be a known `ErrorCode`
    enum8(cls)                         int8; a value `cls` does not know decodes to `cls.UNKNOWN`, so the
                                       handler answers with Kafka's error code instead of the
                                       connection being dropped
    uuid                               16 bytes
    string / nullable string           int16 length (-1 = null) + UTF-8
    bytes / nullable bytes             int32 length (-1 = null) + raw bytes
    array(T) / nullable array(T)       int32 count (-1 = null) + elements
    map_of(K, V)                       an array of (key, value) pairs, decoded as a tuple of 2-tuples
    inline_struct(cls), optional_struct(cls) the struct's fields inline / int8 0|1 + the struct
    record batches                     int32 count + batches in `node.raft.records` format

Every read is bounds-checked, and an array count is refused before anything is allocated when the rest
of the frame cannot hold that many of the smallest possible element.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections.abc import Callable
from enum import IntEnum
from typing import Any

from node.protocol.errors import ErrorCode
from node.raft.records import HEADER_SIZE as BATCH_HEADER_SIZE
from node.raft.records import CorruptBatchError, RecordBatch, decode_batch, encode_batch


class FrameError(ValueError):
    """A frame that cannot be trusted: the connection it came from must be closed unanswered."""


class Cursor:
    """Decoding position over one frame; every read checks bounds so truncation is a FrameError."""

    __slots__ = ("end", "pos", "view")

    def __init__(self, view: memoryview, pos: int, end: int) -> None:
        self.view = view
        self.pos = pos
        self.end = end

    def need(self, n: int, what: str) -> int:
        pos = self.pos
        if n > self.end - pos:
            raise FrameError(f"truncated frame: {what} needs {n} bytes at byte {pos}, {self.end - pos} left")
        self.pos = pos + n
        return pos


class Field:
    """A field type: how one value is written and read, and the fewest bytes it can take."""

    min_size: int = 0

    def encode(self, value: Any, what: str, out: list[bytes]) -> None:
        raise NotImplementedError

    def decode(self, cur: Cursor, what: str) -> Any:
        raise NotImplementedError


# --- fixed-width fields ------------------------------------------------------------------------------


class Fixed(Field):
    """A fixed-width field. Runs of them in a schema are fused into one precompiled struct.Struct.

    `check` validates and converts a decoded value (raises ValueError), `encode_ok` vets a value before
    encoding, `to_wire` converts it for struct.pack (None: the value itself).
    """

    def __init__(
        self,
        code: str,
        name: str,
        check: Callable[[Any], Any] | None = None,
        encode_ok: Callable[[Any], bool] | None = None,
        to_wire: Callable[[Any], Any] | None = None,
        enum: type[IntEnum] | None = None,
    ) -> None:
        self.code = code
        self.enum = enum  # the IntEnum an enum8 field decodes to
        self.name = name
        self.check = check
        self.encode_ok = encode_ok
        self.to_wire = to_wire
        self.packer = struct.Struct(">" + code)
        self.min_size = self.packer.size

    def encode(self, value: Any, what: str, out: list[bytes]) -> None:
        if self.encode_ok is not None and not self.encode_ok(value):
            raise ValueError(f"cannot encode {what}={value!r}")
        try:
            out.append(self.packer.pack(value if self.to_wire is None else self.to_wire(value)))
        except struct.error as e:
            raise ValueError(f"cannot encode {what}={value!r}: {e}") from None

    def decode(self, cur: Cursor, what: str) -> Any:
        (value,) = self.packer.unpack_from(cur.view, cur.need(self.min_size, what))
        if self.check is None:
            return value
        try:
            return self.check(value)
        except ValueError as e:
            raise FrameError(f"{what}: {e}") from None


def _decode_bool(v: int) -> bool:
    if v == 0:
        return False
    if v == 1:
        return True
    raise ValueError(f"bad boolean {v} (must be 0 or 1)")


_ERROR_CODES = {int(e): e for e in ErrorCode}


def _decode_error(v: int) -> ErrorCode:
    try:
        return _ERROR_CODES[v]
    except KeyError:
        raise ValueError(f"unknown error code {v}") from None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


INT8 = Fixed("b", "int8")
INT16 = Fixed("h", "int16")
INT32 = Fixed("i", "int32")
INT64 = Fixed("q", "int64")
UINT16 = Fixed("H", "uint16")
BOOL = Fixed("b", "bool", _decode_bool, lambda v: v is True or v is False)
ERROR = Fixed("h", "error code", _decode_error, lambda v: _is_int(v) and v in _ERROR_CODES)
UUID = Fixed("16s", "uuid", lambda b: uuid.UUID(bytes=b), lambda v: isinstance(v, uuid.UUID), lambda u: u.bytes)


def enum8(cls: type[IntEnum]) -> Fixed:
    """An int8 enum; values the enum does not know decode to `cls.UNKNOWN` (Kafka's `fromCode`)."""
    members = {int(m): m for m in cls}
    unknown = cls["UNKNOWN"]
    return Fixed(
        "b",
        cls.__name__,
        lambda v: members.get(v, unknown),
        lambda v: _is_int(v) and v in members,
        enum=cls,
    )


# --- variable-width fields ---------------------------------------------------------------------------


class String(Field):
    min_size = 2

    def __init__(self, nullable: bool) -> None:
        self.nullable = nullable

    def encode(self, value: str | None, what: str, out: list[bytes]) -> None:
        if value is None:
            if not self.nullable:
                raise ValueError(f"cannot encode {what}=None: the field is not nullable")
            out.append(b"\xff\xff")
            return
        if not isinstance(value, str):
            raise ValueError(f"cannot encode {what}={value!r}: not a string")
        raw = value.encode()
        if len(raw) > 0x7FFF:
            raise ValueError(f"cannot encode {what}: {len(raw)} bytes is over the int16 length limit")
        out.append(_S16.pack(len(raw)))
        out.append(raw)

    def decode(self, cur: Cursor, what: str) -> str | None:
        (n,) = _S16.unpack_from(cur.view, cur.need(2, what))
        if n == -1 and self.nullable:
            return None
        if n < 0:
            raise FrameError(f"{what}: bad string length {n}")
        start = cur.need(n, what)
        try:
            return str(cur.view[start : start + n], "utf-8")
        except UnicodeDecodeError as e:
            raise FrameError(f"{what}: invalid UTF-8 at byte {start + e.start}") from None


class Bytes(Field):
    min_size = 4

    def __init__(self, nullable: bool) -> None:
        self.nullable = nullable

    def encode(self, value: bytes | None, what: str, out: list[bytes]) -> None:
        if value is None:
            if not self.nullable:
                raise ValueError(f"cannot encode {what}=None: the field is not nullable")
            out.append(_I32.pack(-1))
            return
        if not isinstance(value, bytes | bytearray | memoryview):
            raise ValueError(f"cannot encode {what}={value!r}: not bytes")
        out.append(_I32.pack(len(value)))
        out.append(bytes(value))

    def decode(self, cur: Cursor, what: str) -> bytes | None:
        pos = cur.pos
        (n,) = _I32.unpack_from(cur.view, cur.need(4, what))
        if n == -1 and self.nullable:
            return None
        if n < 0:
            raise FrameError(f"{what}: bad bytes length {n} at byte {pos}")
        start = cur.need(n, what)
        return bytes(cur.view[start : start + n])


def decode_count(cur: Cursor, min_item_bytes: int, what: str, nullable: bool = False) -> int:
    """An array count, refused when negative or when the rest of the frame cannot hold it; -1 is null."""
    pos = cur.need(4, what)
    (n,) = _I32.unpack_from(cur.view, pos)
    if n == -1 and nullable:
        return -1
    if n < 0 or n * min_item_bytes > cur.end - cur.pos:
        raise FrameError(f"{what}: bad array count {n} at byte {pos} ({cur.end - cur.pos} bytes left)")
    return n


class Array(Field):
    """An int32 count and the elements; arrays of plain fixed-width ints go through one struct call."""

    min_size = 4

    def __init__(self, elem: Field, nullable: bool) -> None:
        if elem.min_size == 0:
            raise TypeError("an array element must take at least one byte, or a count could not be bounded")
        self.elem = elem
        self.nullable = nullable
        self.bulk = elem.code if isinstance(elem, Fixed) and elem.check is None and elem.to_wire is None else None

    def encode(self, value: Any, what: str, out: list[bytes]) -> None:
        if value is None:
            if not self.nullable:
                raise ValueError(f"cannot encode {what}=None: the field is not nullable")
            out.append(_I32.pack(-1))
            return
        if self.bulk is not None:
            if not all(_is_int(v) for v in value):
                raise ValueError(f"cannot encode {what}={value!r}: not all integers")
            try:
                out.append(struct.pack(f">i{len(value)}{self.bulk}", len(value), *value))
            except struct.error as e:
                raise ValueError(f"cannot encode {what}={value!r}: {e}") from None
            return
        out.append(_I32.pack(len(value)))
        for item in value:
            self.elem.encode(item, what, out)

    def decode(self, cur: Cursor, what: str) -> tuple[Any, ...] | None:
        elem = self.elem
        n = decode_count(cur, max(1, elem.min_size), what, self.nullable)
        if n == -1:
            return None
        if self.bulk is not None:
            size = elem.min_size * n
            return struct.unpack_from(f">{n}{self.bulk}", cur.view, cur.need(size, what))
        return tuple(elem.decode(cur, what) for _ in range(n))


class Pair(Field):
    """One entry of a map: key then value, as a 2-tuple."""

    def __init__(self, key: Field, value: Field) -> None:
        self.key = key
        self.value = value
        self.min_size = key.min_size + value.min_size

    def encode(self, value: Any, what: str, out: list[bytes]) -> None:
        if not isinstance(value, tuple) or len(value) != 2:
            raise ValueError(f"cannot encode {what}: entry {value!r} is not a (key, value) pair")
        self.key.encode(value[0], f"{what} key", out)
        self.value.encode(value[1], f"{what}[{value[0]!r}]", out)

    def decode(self, cur: Cursor, what: str) -> tuple[Any, Any]:
        return (self.key.decode(cur, f"{what} key"), self.value.decode(cur, f"{what} value"))


class Struct(Field):
    """A nested struct written inline (always present)."""

    def __init__(self, cls: type) -> None:
        self.schema = SCHEMAS_BY_CLASS[cls]
        self.min_size = self.schema.min_size

    def encode(self, value: Any, what: str, out: list[bytes]) -> None:
        if type(value) is not self.schema.cls:
            raise ValueError(f"cannot encode {what}={value!r}: not a {self.schema.name}")
        self.schema.encode_into(value, out)

    def decode(self, cur: Cursor, what: str) -> Any:
        return self.schema.decode(cur)


class OptionalStruct(Struct):
    """A nested struct behind an int8 presence flag."""

    def __init__(self, cls: type) -> None:
        super().__init__(cls)
        self.min_size = 1

    def encode(self, value: Any, what: str, out: list[bytes]) -> None:
        if value is None:
            out.append(b"\x00")
            return
        out.append(b"\x01")
        super().encode(value, what, out)

    def decode(self, cur: Cursor, what: str) -> Any:
        (present,) = _I8.unpack_from(cur.view, cur.need(1, what))
        if present == 0:
            return None
        if present == 1:
            return self.schema.decode(cur)
        raise FrameError(f"{what}: bad presence flag {present} (must be 0 or 1)")


class Batches(Field):
    min_size = 4

    def encode(self, value: tuple[RecordBatch, ...], what: str, out: list[bytes]) -> None:
        out.append(_I32.pack(len(value)))
        out.extend(encode_batch(b) for b in value)

    def decode(self, cur: Cursor, what: str) -> tuple[RecordBatch, ...]:
        n = decode_count(cur, BATCH_HEADER_SIZE, what)
        # decode_batch must not see bytes past this frame, so bound the view by the frame's end.
        view = cur.view[: cur.end]
        batches = []
        pos = cur.pos
        for i in range(n):
            try:
                batch, pos = decode_batch(view, pos)
            except CorruptBatchError as e:
                raise FrameError(f"{what}[{i}]: {e}") from None
            batches.append(batch)
        cur.pos = pos
        return tuple(batches)


STRING = String(nullable=True)  # the quorum RPCs' cluster_id is nullable, hence the short name
NULLABLE_STRING = STRING
NONNULL_STRING = String(nullable=False)
BYTES = Bytes(nullable=False)
NULLABLE_BYTES = Bytes(nullable=True)
INT32_ARRAY = Array(INT32, nullable=False)
BATCHES = Batches()


def array(elem: Field) -> Field:
    return Array(elem, nullable=False)


def nullable_array(elem: Field) -> Field:
    return Array(elem, nullable=True)


def struct_array(cls: type) -> Field:
    return Array(Struct(cls), nullable=False)


def inline_struct(cls: type) -> Field:
    return Struct(cls)


def optional_struct(cls: type) -> Field:
    return OptionalStruct(cls)


def map_of(key: Field, value: Field) -> Field:
    return Array(Pair(key, value), nullable=False)


_S16 = struct.Struct(">h")
_I8 = struct.Struct(">b")
_I32 = struct.Struct(">i")


# --- schemas -----------------------------------------------------------------------------------------


class _Step:
    """One encode/decode step of a compiled schema: a fused run of fixed fields, or one other field."""

    __slots__ = ("checks", "convs", "field", "name", "names", "packer", "vets", "what")

    def __init__(self, names: tuple[str, ...], what: str) -> None:
        self.names = names
        self.name = names[0]
        self.what = what
        self.packer: struct.Struct | None = None
        self.checks: tuple[tuple[int, Fixed], ...] = ()
        self.vets: tuple[tuple[int, Fixed], ...] = ()
        self.convs: tuple[tuple[int, Fixed], ...] = ()
        self.field: Field | None = None


class Schema:
    """A message's field list compiled into steps; positional construction follows field order."""

    def __init__(self, cls: type, fields: tuple[tuple[str, Field], ...], older: bool = False) -> None:
        declared = tuple(f.name for f in dataclasses.fields(cls))
        listed = tuple(name for name, _ in fields)
        # An older version lists the first fields only; the others must have defaults to decode into.
        omitted = dataclasses.fields(cls)[len(listed) :] if older else ()
        if (
            declared[: len(listed)] != listed
            or (len(listed) + len(omitted) != len(declared))
            or any(f.default is dataclasses.MISSING for f in omitted)
        ):
            raise TypeError(f"schema of {cls.__name__} lists {fields}, the dataclass has {declared}")
        # (field, default) of the fields this version does not carry
        self.omitted: tuple[tuple[str, Any], ...] = tuple((f.name, f.default) for f in omitted)
        self.cls = cls
        self.name = cls.__name__
        self.fields = fields
        self.steps: list[_Step] = []
        run: list[tuple[str, Fixed]] = []
        for name, ftype in fields:
            if isinstance(ftype, Fixed):
                run.append((name, ftype))
                continue
            self._close_run(run)
            step = _Step((name,), f"{self.name}.{name}")
            step.field = ftype
            self.steps.append(step)
        self._close_run(run)
        # The fewest bytes one encoded instance takes, to refuse impossible array counts early.
        self.min_size = sum(ftype.min_size for _, ftype in fields)
        # The same steps as straight-line code, one function per schema (the methods below are the
        # reference): no loop over steps, no per-step attribute lookups, and nested structs and arrays
        # of them called directly. Same bytes, same values, same errors.
        self.encode_into = _compile_encode(self)  # type: ignore[method-assign]
        self.decode = _compile_decode(self)  # type: ignore[method-assign]

    def _close_run(self, run: list[tuple[str, Fixed]]) -> None:
        if not run:
            return
        names = tuple(n for n, _ in run)
        step = _Step(names, f"{self.name}.{'/'.join(names)}")
        step.packer = struct.Struct(">" + "".join(t.code for _, t in run))
        step.checks = tuple((i, t) for i, (_, t) in enumerate(run) if t.check is not None)
        step.vets = tuple((i, t) for i, (_, t) in enumerate(run) if t.encode_ok is not None)
        step.convs = tuple((i, t) for i, (_, t) in enumerate(run) if t.to_wire is not None)
        self.steps.append(step)
        run.clear()

    def encode_into(self, msg: Any, out: list[bytes]) -> None:
        for step in self.steps:
            field = step.field
            if field is not None:
                field.encode(getattr(msg, step.name), step.what, out)
                continue
            values = [getattr(msg, n) for n in step.names]
            for i, ftype in step.vets:
                if not ftype.encode_ok(values[i]):  # type: ignore[misc]
                    raise ValueError(f"cannot encode {self.name}.{step.names[i]}={values[i]!r}")
            for i, ftype in step.convs:
                values[i] = ftype.to_wire(values[i])  # type: ignore[misc]
            try:
                out.append(step.packer.pack(*values))  # type: ignore[union-attr]
            except struct.error as e:
                raise ValueError(f"cannot encode {step.what}={values}: {e}") from None

    def decode(self, cur: Cursor) -> Any:
        values: list[Any] = []
        view = cur.view
        for step in self.steps:
            field = step.field
            if field is not None:
                values.append(field.decode(cur, step.what))
                continue
            packer = step.packer
            assert packer is not None
            vals = packer.unpack_from(view, cur.need(packer.size, step.what))
            if step.checks:
                vals = list(vals)
                for i, ftype in step.checks:
                    try:
                        vals[i] = ftype.check(vals[i])  # type: ignore[misc]
                    except ValueError as e:
                        raise FrameError(f"{self.name}.{step.names[i]}: {e}") from None
            values.extend(vals)
        return self.cls(*values)


def _is_struct_array(field: Field | None) -> bool:
    return type(field) is Array and field.bulk is None and type(field.elem) is Struct


def _sized_decode(k: int, value: str, nullable: bool, width: int, bad: str, read: list[str]) -> list[str]:
    """`String.decode` / `Bytes.decode` inline: a `width`-byte length (-1: null when `nullable`), then
    that many bytes, which `read` turns into `value` (step k's `what{k}` names the field in errors)."""
    unpack = "S16" if width == 2 else "I32"
    null = ["if n == -1:", f"    {value} = None", "else:"] if nullable else ["if True:"]
    return [
        "start = cur.pos",
        f"if {width} > cur.end - start:",
        f"    raise FrameError(f'truncated frame: {{what{k}}} needs {width} bytes at byte {{start}}, "
        "{cur.end - start} left')",
        f"cur.pos = pos = start + {width}",
        f"n, = {unpack}(view, start)",
        *null,
        "    if n < 0:",
        f"        raise FrameError(f'{{what{k}}}: {bad}')",
        "    if n > cur.end - pos:",
        f"        raise FrameError(f'truncated frame: {{what{k}}} needs {{n}} bytes at byte {{pos}}, "
        "{cur.end - pos} left')",
        "    cur.pos = pos + n",
        *(f"    {line}" for line in read),
    ]


def _string_decode(k: int, value: str, nullable: bool) -> list[str]:
    read = [
        "try:",
        f"    {value} = str(view[pos : pos + n], 'utf-8')",
        "except UnicodeDecodeError as e:",
        f"    raise FrameError(f'{{what{k}}}: invalid UTF-8 at byte {{pos + e.start}}') from None",
    ]
    return _sized_decode(k, value, nullable, 2, "bad string length {n}", read)


def _bytes_decode(k: int, value: str, nullable: bool) -> list[str]:
    read = [f"{value} = bytes(view[pos : pos + n])"]
    return _sized_decode(k, value, nullable, 4, "bad bytes length {n} at byte {start}", read)


def _string_encode(k: int, value: str, nullable: bool) -> list[str]:
    """`String.encode` inline."""
    null = (
        "    append(b'\\xff\\xff')"
        if nullable
        else f"    raise ValueError(f'cannot encode {{what{k}}}=None: the field is not nullable')"
    )
    return [
        f"if {value} is None:",
        null,
        f"elif not isinstance({value}, str):",
        f"    raise ValueError(f'cannot encode {{what{k}}}={{{value}!r}}: not a string')",
        "else:",
        f"    raw = {value}.encode()",
        "    if len(raw) > 0x7FFF:",
        f"        raise ValueError(f'cannot encode {{what{k}}}: {{len(raw)}} bytes is over the int16 length limit')",
        "    append(S16(len(raw)))",
        "    append(raw)",
    ]


def _compile_decode(schema: Schema) -> Callable[[Cursor], Any]:
    """`Schema.decode` of this schema unrolled into one function."""
    ns: dict[str, Any] = {
        "FrameError": FrameError,
        "cls": schema.cls,
        "decode_count": decode_count,
        "S16": _S16.unpack_from,
        "I32": _I32.unpack_from,
    }
    body = ["    view = cur.view"]
    values: list[str] = []
    for k, step in enumerate(schema.steps):
        ns[f"what{k}"] = step.what
        field = step.field
        if field is None:
            assert step.packer is not None
            size = step.packer.size
            ns[f"unpack{k}"] = step.packer.unpack_from
            names = [f"v{len(values) + i}" for i in range(len(step.names))]
            body += [
                "    pos = cur.pos",
                f"    if {size} > cur.end - pos:",
                f"        raise FrameError(f'truncated frame: {{what{k}}} needs {size} bytes at byte {{pos}}, "
                "{cur.end - pos} left')",
                f"    cur.pos = pos + {size}",
                f"    {', '.join(names)}, = unpack{k}(view, pos)",
            ]
            for i, ftype in step.checks:
                ns[f"check{k}_{i}"] = ftype.check
                ns[f"where{k}_{i}"] = f"{schema.name}.{step.names[i]}"
                body += [
                    "    try:",
                    f"        {names[i]} = check{k}_{i}({names[i]})",
                    "    except ValueError as e:",
                    f"        raise FrameError(f'{{where{k}_{i}}}: {{e}}') from None",
                ]
            values += names
            continue
        value = f"v{len(values)}"
        if type(field) is Struct:
            ns[f"sub{k}"] = field.schema.decode
            body.append(f"    {value} = sub{k}(cur)")
        elif _is_struct_array(field):
            assert isinstance(field, Array) and isinstance(field.elem, Struct)
            ns[f"sub{k}"] = field.elem.schema.decode
            body += [
                f"    n = decode_count(cur, {max(1, field.elem.min_size)}, what{k}, {field.nullable})",
                f"    {value} = None if n == -1 else tuple([sub{k}(cur) for _ in range(n)])",
            ]
        elif type(field) is String:
            body += [f"    {line}" for line in _string_decode(k, value, field.nullable)]
        elif type(field) is Bytes:
            body += [f"    {line}" for line in _bytes_decode(k, value, field.nullable)]
        else:
            ns[f"dec{k}"] = field.decode
            body.append(f"    {value} = dec{k}(cur, what{k})")
        values.append(value)
    body.append(f"    return cls({', '.join(values)})")
    exec("def decode(cur):\n" + "\n".join(body), ns)
    return ns["decode"]


def _compile_encode(schema: Schema) -> Callable[[Any, list[bytes]], None]:
    """`Schema.encode_into` of this schema unrolled into one function."""
    ns: dict[str, Any] = {"struct": struct, "I32": _I32.pack, "S16": _S16.pack}
    body = ["    append = out.append"]
    for k, step in enumerate(schema.steps):
        ns[f"what{k}"] = step.what
        field = step.field
        if field is None:
            assert step.packer is not None
            ns[f"pack{k}"] = step.packer.pack
            names = [f"v{k}_{i}" for i in range(len(step.names))]
            body += [f"    {v} = msg.{name}" for v, name in zip(names, step.names)]
            for i, ftype in step.vets:
                ns[f"vet{k}_{i}"] = ftype.encode_ok
                ns[f"where{k}_{i}"] = f"{schema.name}.{step.names[i]}"
                body += [
                    f"    if not vet{k}_{i}({names[i]}):",
                    f"        raise ValueError(f'cannot encode {{where{k}_{i}}}={{{names[i]}!r}}')",
                ]
            for i, ftype in step.convs:
                ns[f"conv{k}_{i}"] = ftype.to_wire
                body.append(f"    {names[i]} = conv{k}_{i}({names[i]})")
            listed = ", ".join(names)
            body += [
                "    try:",
                f"        append(pack{k}({listed}))",
                "    except struct.error as e:",
                f"        raise ValueError(f'cannot encode {{what{k}}}={{[{listed}]}}: {{e}}') from None",
            ]
            continue
        value = f"v{k}"
        body.append(f"    {value} = msg.{step.name}")
        if type(field) is Struct or _is_struct_array(field):
            elem = field if type(field) is Struct else field.elem  # type: ignore[attr-defined]
            ns[f"sub{k}"] = elem.schema.encode_into
            ns[f"cls{k}"] = elem.schema.cls
            ns[f"name{k}"] = elem.schema.name
            check = [
                f"if type(item) is not cls{k}:",
                f"    raise ValueError(f'cannot encode {{what{k}}}={{item!r}}: not a {{name{k}}}')",
                f"sub{k}(item, out)",
            ]
            if type(field) is Struct:
                body.append(f"    item = {value}")
                body += [f"    {line}" for line in check]
                continue
            assert isinstance(field, Array)
            body += [
                f"    if {value} is None:",
                *(
                    ["        append(I32(-1))"]
                    if field.nullable
                    else [f"        raise ValueError(f'cannot encode {{what{k}}}=None: the field is not nullable')"]
                ),
                "    else:",
                f"        append(I32(len({value})))",
                f"        for item in {value}:",
                *(f"            {line}" for line in check),
            ]
            continue
        if type(field) is String:
            body += [f"    {line}" for line in _string_encode(k, value, field.nullable)]
            continue
        ns[f"enc{k}"] = field.encode
        body.append(f"    enc{k}({value}, what{k}, out)")
    exec("def encode_into(msg, out):\n" + "\n".join(body), ns)
    return ns["encode_into"]


SCHEMAS_BY_CLASS: dict[type, Schema] = {}  # the latest layout of each message
SCHEMA_VERSIONS: dict[type, dict[int, Schema]] = {}  # every layout of each message, by version


def define(cls: type, *fields: tuple[str, Field], version: int = 0) -> None:
    """Declare a message's (latest) wire layout; nested structs must be defined before the messages
    using them."""
    if cls in SCHEMAS_BY_CLASS:
        raise TypeError(f"{cls.__name__} already has a schema")
    SCHEMAS_BY_CLASS[cls] = schema = Schema(cls, fields)
    SCHEMA_VERSIONS[cls] = {version: schema}


def define_older(cls: type, version: int, *fields: tuple[str, Field]) -> None:
    """Declare an older version of a message's layout: the first fields of the latest one. Decoded,
    the fields it lacks take their defaults; a message whose later fields all hold their defaults is
    sent in it, so a peer that knows only the older version still understands it."""
    versions = SCHEMA_VERSIONS.get(cls)
    if versions is None or version in versions or version >= max(versions):
        raise TypeError(f"{cls.__name__} v{version}: define the latest layout first, then older ones")
    versions[version] = Schema(cls, fields, older=True)


__all__ = [
    "BATCHES",
    "BOOL",
    "BYTES",
    "ERROR",
    "INT8",
    "INT16",
    "INT32",
    "INT32_ARRAY",
    "INT64",
    "NONNULL_STRING",
    "NULLABLE_BYTES",
    "NULLABLE_STRING",
    "SCHEMAS_BY_CLASS",
    "SCHEMA_VERSIONS",
    "STRING",
    "UINT16",
    "UUID",
    "Array",
    "Batches",
    "Bytes",
    "Cursor",
    "Field",
    "Fixed",
    "FrameError",
    "OptionalStruct",
    "Pair",
    "Schema",
    "String",
    "Struct",
    "array",
    "decode_count",
    "define",
    "define_older",
    "enum8",
    "inline_struct",
    "map_of",
    "nullable_array",
    "optional_struct",
    "struct_array",
]
