"""Length-prefixed binary frames for every API kraft-chaos speaks, behind one small `Codec` interface.

Frame layout (big-endian):

    length          int32   bytes that follow this field
    api_key         int16   Kafka's API key (registry.API_KEYS)
    api_version     int16   schema version of the body (0, but VoteRequest v2 for a KIP-996 pre-vote)
    correlation_id  int32   echoed in the response
    flags           int8    bit 0: response; other bits must be 0
    body            the message's fields in declaration order

Field encodings are in `fields` (ints, booleans as int8 0|1, error codes that must be known, int8
enums, UUIDs, strings, bytes, arrays, maps, nested and optional structs, record batches whose CRC32C is
verified); every message's field list is in `schemas`.

Anything a peer sends that does not decode cleanly raises `FrameError` with a one-line reason; the
runtime then closes that one connection and keeps serving the others. The codec is stateless and does
no I/O, so the simulator can use it too.
"""

from __future__ import annotations

import struct
from collections.abc import Collection
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Protocol

import node.protocol.schemas  # noqa: F401  (defines every message's layouts in fields.SCHEMA_VERSIONS)
from node.protocol.fields import SCHEMA_VERSIONS, Cursor, FrameError, Schema
from node.protocol.registry import API_KEYS, API_NAMES, REQUESTS, RESPONSES

DEFAULT_MAX_FRAME_BYTES = 8 << 20
LENGTH = struct.Struct(">i")
HEADER = struct.Struct(">hhib")  # api_key, api_version, correlation_id, flags (after the length)
_PREFIXED_HEADER = struct.Struct(">ihhib")
RESPONSE_FLAG = 0x01


class FrameKind(IntEnum):
    REQUEST = 0
    RESPONSE = 1


@dataclass(frozen=True, slots=True)
class Frame:
    kind: FrameKind
    api_key: int
    api_version: int
    correlation_id: int
    message: Any  # an instance of one of registry.REQUESTS or registry.RESPONSES


@dataclass(frozen=True, slots=True)
class EncodedResponse:
    """A response frame already encoded for the correlation id it answers: a runtime that writes frames
    sends `frame` as it is (a broker passing on the controller's answer to a forwarded request)."""

    frame: bytes


def response_header(frame: bytes) -> tuple[int, int] | None:
    """(api_key, correlation_id) of a whole response frame whose length prefix matches; None if it is
    not one. Only the header is read: the body stays for whoever decodes it."""
    if len(frame) < _PREFIXED_HEADER.size:
        return None
    length, api_key, version, correlation_id, flags = _PREFIXED_HEADER.unpack_from(frame)
    if length != len(frame) - LENGTH.size or flags != RESPONSE_FLAG:
        return None
    if version not in SUPPORTED_VERSIONS.get(api_key, ()):
        return None
    return api_key, correlation_id


class Codec(Protocol):
    """What a runtime needs from a wire format; a Kafka-compatible format can implement it later."""

    max_frame_bytes: int

    def encode_request(self, correlation_id: int, msg: Any) -> bytes: ...

    def encode_response(self, correlation_id: int, msg: Any) -> bytes: ...

    def decode(self, frame: bytes | bytearray | memoryview) -> Frame:
        """Decode one whole frame, length prefix included; raises FrameError."""
        ...


# (api_key, kind, version) -> schema. A new version adds entries here; old ones stay decodable.
_BY_WIRE: dict[tuple[int, FrameKind, int], Schema] = {}
# The layouts a message may be sent in, oldest first: the oldest that carries all its non-default
# fields is used (a VoteRequest is v0 unless it is a pre-vote).
_SEND_LAYOUTS: dict[type, tuple[tuple[int, Schema], ...]] = {}
for _kind, _classes in ((FrameKind.REQUEST, REQUESTS), (FrameKind.RESPONSE, RESPONSES)):
    for _cls in _classes:
        _versions = SCHEMA_VERSIONS[_cls]
        for _version, _schema in _versions.items():
            _BY_WIRE[(API_KEYS[_cls], _kind, _version)] = _schema
        _SEND_LAYOUTS[_cls] = tuple(sorted(_versions.items()))
_REQUEST_CLASSES = frozenset(REQUESTS)
_RESPONSE_CLASSES = frozenset(RESPONSES)
SUPPORTED_VERSIONS: dict[int, tuple[int, ...]] = {key: () for key in API_NAMES}
for _key, _kind, _version in _BY_WIRE:
    if _version not in SUPPORTED_VERSIONS[_key]:
        SUPPORTED_VERSIONS[_key] = tuple(sorted((*SUPPORTED_VERSIONS[_key], _version)))


class BinaryCodec:
    """kraft-chaos's own frame format (see the module docstring)."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, api_keys: Collection[int] | None = None) -> None:
        """`api_keys`: the APIs this endpoint decodes (registry.QUORUM_API_KEYS, ...; None: all).

        A frame of any other API is a FrameError, so a request meant for another kind of endpoint never
        reaches a state machine that cannot handle it (Kafka closes such a connection too).
        """
        if max_frame_bytes < HEADER.size:
            raise ValueError(f"max_frame_bytes {max_frame_bytes} cannot even hold a frame header")
        unknown = set(api_keys or ()) - set(API_NAMES)
        if unknown:
            raise ValueError(f"unknown api keys {sorted(unknown)}")
        self.max_frame_bytes = max_frame_bytes
        self.api_keys = frozenset(API_NAMES if api_keys is None else api_keys)

    def encode_request(self, correlation_id: int, msg: Any) -> bytes:
        if type(msg) not in _REQUEST_CLASSES:
            raise TypeError(f"{type(msg).__name__} is not a request")
        return self._encode(correlation_id, msg, 0)

    def encode_response(self, correlation_id: int, msg: Any) -> bytes:
        if type(msg) not in _RESPONSE_CLASSES:
            raise TypeError(f"{type(msg).__name__} is not a response")
        return self._encode(correlation_id, msg, RESPONSE_FLAG)

    def _encode(self, correlation_id: int, msg: Any, flags: int) -> bytes:
        cls = type(msg)
        layouts = _SEND_LAYOUTS[cls]
        version, schema = layouts[-1]
        for older, layout in layouts[:-1]:
            if all(getattr(msg, name) == default for name, default in layout.omitted):
                version, schema = older, layout
                break
        parts: list[bytes] = [b""]
        schema.encode_into(msg, parts)
        length = HEADER.size + sum(len(p) for p in parts)
        if length > self.max_frame_bytes:
            raise ValueError(
                f"encoded {cls.__name__} frame is {length} bytes, over the {self.max_frame_bytes}-byte limit"
            )
        try:
            parts[0] = _PREFIXED_HEADER.pack(length, API_KEYS[cls], version, correlation_id, flags)
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
            if api_key not in API_NAMES:
                raise FrameError(f"unknown api key {api_key}")
            raise FrameError(
                f"unsupported version {version} of api key {api_key} ({API_NAMES[api_key]}); "
                f"supported: {SUPPORTED_VERSIONS[api_key]}"
            )
        if api_key not in self.api_keys:
            raise FrameError(f"api key {api_key} ({API_NAMES[api_key]}) is not served on this endpoint")
        cur = Cursor(view, _PREFIXED_HEADER.size, total)
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
    "DEFAULT_MAX_FRAME_BYTES",
    "SUPPORTED_VERSIONS",
    "BinaryCodec",
    "Codec",
    "EncodedResponse",
    "Frame",
    "FrameError",
    "FrameKind",
    "FrameReader",
    "check_length",
    "response_header",
]
