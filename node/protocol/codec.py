"""Length-prefixed binary frames for the quorum RPCs, behind one small `Codec` interface.

Frame layout (big-endian):

    length          int32   bytes that follow this field
    api_key         int16   Kafka's API key (messages.API_KEYS)
    api_version     int16   schema version of the body (0 today)
    correlation_id  int32   echoed in the response
    flags           int8    bit 0: response; other bits must be 0
    body            the message's fields in declaration order

Field encodings: ints as int16/int32/int64, booleans as int8 0|1, error codes as int16 (must be a
known `ErrorCode`), nullable strings as int16 length (-1 = null) + UTF-8, arrays as int32 count +
elements, an optional struct as int8 0|1 + the struct, record batches as int32 count + each batch in
`node.raft.records` format (its CRC32C is verified on decode).

Anything a peer sends that does not decode cleanly raises `FrameError` with a one-line reason; the
runtime then closes that one connection and keeps serving the others. The codec is stateless and does
no I/O, so the simulator can use it too.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Protocol

from node.protocol.errors import ErrorCode
from node.protocol.messages import (
    API_KEYS,
    REQUESTS,
    RESPONSES,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    ReplicaState,
    Request,
    Response,
    VoteRequest,
    VoteResponse,
)
from node.raft.records import HEADER_SIZE as BATCH_HEADER_SIZE
from node.raft.records import CorruptBatchError, RecordBatch, decode_batch, encode_batch

DEFAULT_MAX_FRAME_BYTES = 8 << 20
LENGTH = struct.Struct(">i")
HEADER = struct.Struct(">hhib")  # api_key, api_version, correlation_id, flags (after the length)
_PREFIXED_HEADER = struct.Struct(">ihhib")
RESPONSE_FLAG = 0x01


class FrameError(ValueError):
    """A frame that cannot be trusted: the connection it came from must be closed unanswered."""


class FrameKind(IntEnum):
    REQUEST = 0
    RESPONSE = 1


@dataclass(frozen=True, slots=True)
class Frame:
    kind: FrameKind
    api_key: int
    api_version: int
    correlation_id: int
    message: Request | Response


class Codec(Protocol):
    """What a runtime needs from a wire format; a Kafka-compatible format can implement it later."""

    max_frame_bytes: int

    def encode_request(self, correlation_id: int, msg: Request) -> bytes: ...

    def encode_response(self, correlation_id: int, msg: Response) -> bytes: ...

    def decode(self, frame: bytes | bytearray | memoryview) -> Frame:
        """Decode one whole frame, length prefix included; raises FrameError."""
        ...


# --- field types ---------------------------------------------------------------------------------
# A schema is a tuple of (field name, field type). Runs of fixed-width fields are fused into one
# precompiled struct.Struct, so a typical message is one pack/unpack call plus its variable parts.


class _Fixed:
    """A fixed-width field; `check` validates and converts a decoded value (None: any value)."""

    __slots__ = ("check", "code", "encode_ok", "name")

    def __init__(
        self,
        code: str,
        name: str,
        check: Callable[[int], Any] | None = None,
        encode_ok: Callable[[Any], bool] | None = None,
    ) -> None:
        self.code = code
        self.name = name
        self.check = check
        self.encode_ok = encode_ok


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


INT16 = _Fixed("h", "int16")
INT32 = _Fixed("i", "int32")
INT64 = _Fixed("q", "int64")
BOOL = _Fixed("b", "bool", _decode_bool, lambda v: v is True or v is False)
ERROR = _Fixed("h", "error code", _decode_error, lambda v: v in _ERROR_CODES)


@dataclass(frozen=True, slots=True)
class _Variable:
    """A variable-width field: `kind` picks the encoding, `cls` is the nested struct's dataclass."""

    kind: str  # "string" | "int32_array" | "struct_array" | "optional_struct" | "batches"
    cls: type | None = None


STRING = _Variable("string")
INT32_ARRAY = _Variable("int32_array")
BATCHES = _Variable("batches")


def struct_array(cls: type) -> _Variable:
    return _Variable("struct_array", cls)


def optional_struct(cls: type) -> _Variable:
    return _Variable("optional_struct", cls)


FieldType = _Fixed | _Variable

_S16 = struct.Struct(">h")
_I8 = struct.Struct(">b")
_I32 = LENGTH


class _Cursor:
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


class _Step:
    """One encode/decode step of a compiled schema."""

    __slots__ = ("checks", "kind", "names", "packer", "sub", "what")

    def __init__(self, kind: str, names: tuple[str, ...], what: str) -> None:
        self.kind = kind
        self.names = names
        self.what = what
        self.packer: struct.Struct | None = None
        self.checks: tuple[tuple[int, _Fixed], ...] = ()
        self.sub: _Schema | None = None


class _Schema:
    """A message's field list compiled into steps; positional construction follows field order."""

    def __init__(self, cls: type, fields: tuple[tuple[str, FieldType], ...]) -> None:
        declared = tuple(f.name for f in dataclasses.fields(cls))
        if declared != tuple(name for name, _ in fields):
            raise TypeError(f"schema of {cls.__name__} lists {fields}, the dataclass has {declared}")
        self.cls = cls
        self.name = cls.__name__
        self.steps: list[_Step] = []
        run: list[tuple[str, _Fixed]] = []
        for name, ftype in fields:
            if isinstance(ftype, _Fixed):
                run.append((name, ftype))
                continue
            self._close_run(run)
            step = _Step(ftype.kind, (name,), f"{self.name}.{name}")
            if ftype.cls is not None:
                step.sub = SCHEMAS_BY_CLASS[ftype.cls]
            self.steps.append(step)
        self._close_run(run)
        # The fewest bytes one encoded instance takes, to refuse impossible array counts early.
        self.min_size = max(1, sum(s.packer.size for s in self.steps if s.packer is not None))

    def _close_run(self, run: list[tuple[str, _Fixed]]) -> None:
        if not run:
            return
        names = tuple(n for n, _ in run)
        step = _Step("fixed", names, f"{self.name}.{'/'.join(names)}")
        step.packer = struct.Struct(">" + "".join(t.code for _, t in run))
        step.checks = tuple((i, t) for i, (_, t) in enumerate(run) if t.check is not None)
        self.steps.append(step)
        run.clear()

    # --- encode ---

    def encode_into(self, msg: Any, out: list[bytes]) -> None:
        for step in self.steps:
            kind = step.kind
            if kind == "fixed":
                values = [getattr(msg, n) for n in step.names]
                for i, ftype in step.checks:
                    assert ftype.encode_ok is not None
                    if not ftype.encode_ok(values[i]):
                        raise ValueError(f"cannot encode {self.name}.{step.names[i]}={values[i]!r}")
                try:
                    out.append(step.packer.pack(*values))  # type: ignore[union-attr]
                except struct.error as e:
                    raise ValueError(f"cannot encode {step.what}={values}: {e}") from None
                continue
            value = getattr(msg, step.names[0])
            if kind == "string":
                _encode_string(value, step.what, out)
            elif kind == "int32_array":
                try:
                    out.append(struct.pack(f">i{len(value)}i", len(value), *value))
                except struct.error as e:
                    raise ValueError(f"cannot encode {step.what}={value!r}: {e}") from None
            elif kind == "struct_array":
                out.append(_I32.pack(len(value)))
                for item in value:
                    step.sub.encode_into(item, out)  # type: ignore[union-attr]
            elif kind == "optional_struct":
                if value is None:
                    out.append(b"\x00")
                else:
                    out.append(b"\x01")
                    step.sub.encode_into(value, out)  # type: ignore[union-attr]
            else:  # batches
                out.append(_I32.pack(len(value)))
                out.extend(encode_batch(b) for b in value)

    # --- decode ---

    def decode(self, cur: _Cursor) -> Any:
        values: list[Any] = []
        view = cur.view
        for step in self.steps:
            kind = step.kind
            if kind == "fixed":
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
            elif kind == "string":
                values.append(_decode_string(cur, step.what))
            elif kind == "int32_array":
                n = _decode_count(cur, 4, step.what)
                values.append(struct.unpack_from(f">{n}i", view, cur.need(4 * n, step.what)))
            elif kind == "struct_array":
                sub = step.sub
                assert sub is not None
                n = _decode_count(cur, sub.min_size, step.what)
                values.append(tuple(sub.decode(cur) for _ in range(n)))
            elif kind == "optional_struct":
                (present,) = _I8.unpack_from(view, cur.need(1, step.what))
                if present == 0:
                    values.append(None)
                elif present == 1:
                    values.append(step.sub.decode(cur))  # type: ignore[union-attr]
                else:
                    raise FrameError(f"{step.what}: bad presence flag {present} (must be 0 or 1)")
            else:  # batches
                values.append(_decode_batches(cur, step.what))
        return self.cls(*values)


def _encode_string(value: str | None, what: str, out: list[bytes]) -> None:
    if value is None:
        out.append(b"\xff\xff")
        return
    raw = value.encode()
    if len(raw) > 0x7FFF:
        raise ValueError(f"cannot encode {what}: {len(raw)} bytes is over the int16 length limit")
    out.append(_S16.pack(len(raw)))
    out.append(raw)


def _decode_string(cur: _Cursor, what: str) -> str | None:
    (n,) = _S16.unpack_from(cur.view, cur.need(2, what))
    if n == -1:
        return None
    if n < 0:
        raise FrameError(f"{what}: bad string length {n}")
    start = cur.need(n, what)
    try:
        return str(cur.view[start : start + n], "utf-8")
    except UnicodeDecodeError as e:
        raise FrameError(f"{what}: invalid UTF-8 at byte {start + e.start}") from None


def _decode_count(cur: _Cursor, min_item_bytes: int, what: str) -> int:
    """An array count, refused when negative or when the rest of the frame cannot hold it."""
    pos = cur.need(4, what)
    (n,) = _I32.unpack_from(cur.view, pos)
    if n < 0 or n * min_item_bytes > cur.end - cur.pos:
        raise FrameError(f"{what}: bad array count {n} at byte {pos} ({cur.end - cur.pos} bytes left)")
    return n


def _decode_batches(cur: _Cursor, what: str) -> tuple[RecordBatch, ...]:
    n = _decode_count(cur, BATCH_HEADER_SIZE, what)
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


# --- schemas, version 0 ----------------------------------------------------------------------------

SCHEMAS_BY_CLASS: dict[type, _Schema] = {}


def _define(cls: type, *fields: tuple[str, FieldType]) -> None:
    SCHEMAS_BY_CLASS[cls] = _Schema(cls, fields)


# Nested structs first: the messages that contain them look them up while compiling.
_define(EpochEndOffset, ("epoch", INT32), ("end_offset", INT64))
_define(
    ReplicaState,
    ("replica_id", INT32),
    ("log_end_offset", INT64),
    ("last_fetch_timestamp", INT64),
    ("last_caught_up_timestamp", INT64),
)
_define(
    VoteRequest,
    ("cluster_id", STRING),
    ("candidate_epoch", INT32),
    ("candidate_id", INT32),
    ("last_offset_epoch", INT32),
    ("last_offset", INT64),
)
_define(VoteResponse, ("error_code", ERROR), ("leader_id", INT32), ("leader_epoch", INT32), ("vote_granted", BOOL))
_define(BeginQuorumEpochRequest, ("cluster_id", STRING), ("leader_id", INT32), ("leader_epoch", INT32))
_define(BeginQuorumEpochResponse, ("error_code", ERROR), ("leader_id", INT32), ("leader_epoch", INT32))
_define(
    EndQuorumEpochRequest,
    ("cluster_id", STRING),
    ("replica_id", INT32),
    ("leader_id", INT32),
    ("leader_epoch", INT32),
    ("preferred_successors", INT32_ARRAY),
)
_define(EndQuorumEpochResponse, ("error_code", ERROR), ("leader_id", INT32), ("leader_epoch", INT32))
_define(
    FetchRequest,
    ("cluster_id", STRING),
    ("replica_id", INT32),
    ("current_leader_epoch", INT32),
    ("fetch_offset", INT64),
    ("last_fetched_epoch", INT32),
    ("max_wait_ms", INT32),
    ("max_bytes", INT32),
)
_define(
    FetchResponse,
    ("error_code", ERROR),
    ("leader_id", INT32),
    ("leader_epoch", INT32),
    ("high_watermark", INT64),
    ("log_start_offset", INT64),
    ("diverging_epoch", optional_struct(EpochEndOffset)),
    ("records", BATCHES),
)
_define(DescribeQuorumRequest)
_define(
    DescribeQuorumResponse,
    ("error_code", ERROR),
    ("leader_id", INT32),
    ("leader_epoch", INT32),
    ("high_watermark", INT64),
    ("current_voters", struct_array(ReplicaState)),
    ("observers", struct_array(ReplicaState)),
    ("cluster_id", STRING),
    ("leader_time_ms", INT64),
)

CURRENT_VERSION = 0
# (api_key, kind, version) -> schema. A new version adds entries here; old ones stay decodable.
_BY_WIRE: dict[tuple[int, FrameKind, int], _Schema] = {}
for _cls in REQUESTS:
    _BY_WIRE[(API_KEYS[_cls], FrameKind.REQUEST, 0)] = SCHEMAS_BY_CLASS[_cls]
for _cls in RESPONSES:
    _BY_WIRE[(API_KEYS[_cls], FrameKind.RESPONSE, 0)] = SCHEMAS_BY_CLASS[_cls]
_REQUEST_CLASSES = frozenset(REQUESTS)
_RESPONSE_CLASSES = frozenset(RESPONSES)
_API_NAMES = {API_KEYS[cls]: cls.__name__.removesuffix("Request") for cls in REQUESTS}
SUPPORTED_VERSIONS: dict[int, tuple[int, ...]] = {key: (0,) for key in _API_NAMES}


class BinaryCodec:
    """kraft-chaos's own frame format (see the module docstring)."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < HEADER.size:
            raise ValueError(f"max_frame_bytes {max_frame_bytes} cannot even hold a frame header")
        self.max_frame_bytes = max_frame_bytes

    def encode_request(self, correlation_id: int, msg: Request) -> bytes:
        if type(msg) not in _REQUEST_CLASSES:
            raise TypeError(f"{type(msg).__name__} is not a request")
        return self._encode(correlation_id, msg, 0)

    def encode_response(self, correlation_id: int, msg: Response) -> bytes:
        if type(msg) not in _RESPONSE_CLASSES:
            raise TypeError(f"{type(msg).__name__} is not a response")
        return self._encode(correlation_id, msg, RESPONSE_FLAG)

    def _encode(self, correlation_id: int, msg: Request | Response, flags: int) -> bytes:
        cls = type(msg)
        parts: list[bytes] = [b""]
        SCHEMAS_BY_CLASS[cls].encode_into(msg, parts)
        length = HEADER.size + sum(len(p) for p in parts)
        if length > self.max_frame_bytes:
            raise ValueError(
                f"encoded {cls.__name__} frame is {length} bytes, over the {self.max_frame_bytes}-byte limit"
            )
        try:
            parts[0] = _PREFIXED_HEADER.pack(length, API_KEYS[cls], CURRENT_VERSION, correlation_id, flags)
        except struct.error as e:
            raise ValueError(f"cannot encode correlation id {correlation_id}: {e}") from None
        return b"".join(parts)

    def decode(self, frame: bytes | bytearray | memoryview) -> Frame:
        view = memoryview(frame)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        total = len(view)
        if total < _PREFIXED_HEADER.size:
            raise FrameError(f"truncated frame: {total} bytes, a frame header needs {_PREFIXED_HEADER.size}")
        length, api_key, version, correlation_id, flags = _PREFIXED_HEADER.unpack_from(view)
        check_length(length, self.max_frame_bytes)
        if length != total - LENGTH.size:
            raise FrameError(f"frame length prefix says {length} bytes but {total - LENGTH.size} follow")
        if flags & ~RESPONSE_FLAG:
            raise FrameError(f"bad frame flags 0x{flags & 0xFF:02x} (only bit 0 is defined)")
        kind = FrameKind.RESPONSE if flags & RESPONSE_FLAG else FrameKind.REQUEST
        schema = _BY_WIRE.get((api_key, kind, version))
        if schema is None:
            if api_key not in _API_NAMES:
                raise FrameError(f"unknown api key {api_key}")
            raise FrameError(
                f"unsupported version {version} of api key {api_key} ({_API_NAMES[api_key]}); "
                f"supported: {SUPPORTED_VERSIONS[api_key]}"
            )
        cur = _Cursor(view, _PREFIXED_HEADER.size, total)
        message = schema.decode(cur)
        if cur.pos != total:
            raise FrameError(f"{total - cur.pos} trailing bytes after the {schema.name} body")
        return Frame(kind, api_key, version, correlation_id, message)


def check_length(length: int, max_frame_bytes: int) -> None:
    """Refuse a length prefix before any of the body is buffered."""
    if length < HEADER.size:
        raise FrameError(f"bad frame length {length}: a frame header needs {HEADER.size} bytes")
    if length > max_frame_bytes:
        raise FrameError(f"frame length {length} is over the {max_frame_bytes}-byte limit")


class FrameReader:
    """Splits a byte stream into whole frames (length prefix included), for one connection.

    `feed` refuses an oversized or impossible length prefix as soon as its 4 bytes arrive, without
    waiting for (or buffering) the body. After a FrameError the stream has lost its framing: the reader
    refuses further input and the connection must be closed.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._start = 0
        self._failed: FrameError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame (a partial frame at the end of a stream)."""
        return len(self._buf) - self._start

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        if self._failed is not None:
            raise FrameError(f"stream already failed: {self._failed}")
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        start = self._start
        try:
            while len(buf) - start >= LENGTH.size:
                (length,) = LENGTH.unpack_from(buf, start)
                check_length(length, self.max_frame_bytes)
                stop = start + LENGTH.size + length
                if stop > len(buf):
                    break
                frames.append(bytes(buf[start:stop]))
                start = stop
        except FrameError as e:
            self._failed = e
            raise
        if start == len(buf):
            buf.clear()
            start = 0
        elif start > 65536 and start * 2 > len(buf):
            del buf[:start]
            start = 0
        self._start = start
        return frames


__all__ = [
    "CURRENT_VERSION",
    "DEFAULT_MAX_FRAME_BYTES",
    "SUPPORTED_VERSIONS",
    "BinaryCodec",
    "Codec",
    "Frame",
    "FrameError",
    "FrameKind",
    "FrameReader",
    "check_length",
]
