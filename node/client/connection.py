"""One client connection to one server: connect, ApiVersions, SASL/PLAIN, then multiplexed requests.

Opening a connection runs ApiVersions (which APIs this endpoint serves) and, with credentials, the
SASL/PLAIN exchange. Every failure while opening is definite for the caller's request, which has not
been written yet. After that, requests share the connection, matched to answers by correlation id; a
request that was written and then timed out, lost its connection or got an undecodable answer fails
with an indefinite error (see `node.client.errors`). A late answer to a timed-out request is dropped;
the connection stays open for the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from dataclasses import dataclass

from node.client.errors import (
    AuthenticationError,
    ClientTimeoutError,
    ConnectError,
    ConnectionLostError,
    KafkaError,
    ProtocolError,
    server_error,
    unencodable,
)
from node.protocol.codec import BinaryCodec, FrameError, FrameKind, FrameReader
from node.protocol.errors import ErrorCode
from node.protocol.registry import API_KEYS, RESPONSE_FOR, SESSION_API_KEYS
from node.protocol.session import ApiVersionsRequest, ApiVersionsResponse
from node.runtime.frame_writer import FrameWriter
from node.security.sasl import SaslClientSession, SaslFailure


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_addresses(text: str) -> tuple[Address, ...]:
    """`"host:port,host:port"` -> addresses; raises ValueError naming the bad entry."""
    addresses = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        host, sep, port_text = part.rpartition(":")
        port = int(port_text) if port_text.isdigit() else -1
        host = host.strip().removeprefix("[").removesuffix("]")
        if not sep or not host or not 0 < port < 65536:
            raise ValueError(f"bootstrap server '{part}' is not HOST:PORT")
        addresses.append(Address(host, port))
    if not addresses:
        raise ValueError("no bootstrap server given")
    return tuple(dict.fromkeys(addresses))


class Connection:
    """A connection to `address`; `open()` it, then `request()` any number of times concurrently."""

    def __init__(
        self,
        address: Address,
        codec: BinaryCodec,
        credentials: tuple[str, str] | None = None,
    ) -> None:
        self.address = address
        self.codec = codec
        self.credentials = credentials
        self.served: dict[int, tuple[int, int]] = {}  # api key -> (min, max) from ApiVersions
        self._writer: asyncio.StreamWriter | None = None
        self._out: FrameWriter | None = None  # the requests of one loop turn leave in one send
        self._reading: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[object]] = {}
        self._ids = itertools.count(1)
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def serves(self, api_key: int) -> bool:
        """Whether this endpoint serves `api_key`; an empty ApiVersions answer is taken as "everything", and
        the connection-level APIs (ApiVersions, SASL) are served everywhere even when not listed."""
        return not self.served or api_key in self.served or api_key in SESSION_API_KEYS

    async def open(self, timeout_s: float) -> None:
        """Connect, ask ApiVersions, authenticate; raises ConnectError or AuthenticationError (both definite)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        where = str(self.address)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.address.host, self.address.port), timeout_s
            )
        except TimeoutError:
            raise ConnectError(f"no connection within {timeout_s * 1000:.0f} ms", server=where) from None
        except OSError as exc:
            raise ConnectError(f"cannot connect: {exc.strerror or exc}", server=where) from None
        self._writer = writer
        self._out = FrameWriter(writer, loop)
        self._reading = loop.create_task(self._read(reader, writer))
        try:
            versions = await self.request(ApiVersionsRequest(), deadline)
            assert isinstance(versions, ApiVersionsResponse)
            if versions.error_code != ErrorCode.NONE:
                raise server_error(versions.error_code, "ApiVersions refused", server=where)
            self.served = {v.api_key: (v.min_version, v.max_version) for v in versions.api_keys}
            if self.credentials is not None:
                await self._authenticate(deadline)
        except AuthenticationError:
            await self.close()
            raise
        except KafkaError as exc:
            await self.close()
            # Nothing of the caller's request was written: whatever broke here is definite for it.
            raise ConnectError(f"connection setup failed: {exc}", server=where) from None
        except BaseException:  # cancelled while opening: leave no reader task behind
            await asyncio.shield(self.close())
            raise

    async def _authenticate(self, deadline: float) -> None:
        username, password = self.credentials or ("", "")
        session = SaslClientSession(username, password)
        step: object | None = session.first_request()
        while step is not None:
            answer = await self.request(step, deadline)
            try:
                step = session.on_response(answer)
            except SaslFailure as exc:
                raise AuthenticationError(exc.error_code, str(exc), definite=True, server=str(self.address)) from None

    async def request(self, message: object, deadline: float) -> object:
        """Send `message`, wait for its answer until `deadline` (loop time); typed errors as in `errors`."""
        loop = asyncio.get_running_loop()
        where = str(self.address)
        if self._closed or self._out is None:
            raise ConnectError("connection is closed; request not sent", server=where)
        correlation_id = next(self._ids)
        try:
            frame = self.codec.encode_request(correlation_id, message)
        except (TypeError, ValueError) as exc:
            raise unencodable(str(exc)) from None
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise ClientTimeoutError("deadline passed before the request was sent", sent=False, server=where)
        future: asyncio.Future[object] = loop.create_future()
        self._pending[correlation_id] = future
        self._out.write(frame)  # from here on, the server may apply the request
        # One timer that fails the future itself, rather than asyncio.wait_for's second future and the
        # callbacks between the two: the answer wakes this task in one step (the client's hot path).
        timer = loop.call_at(deadline, _expire, future)
        try:
            answer = await future
        except _Expired:
            raise ClientTimeoutError(
                f"no answer to {type(message).__name__} within the deadline", sent=True, server=where
            ) from None
        finally:
            timer.cancel()
            self._pending.pop(correlation_id, None)
        if type(answer) is not RESPONSE_FOR[type(message)]:
            raise ProtocolError(f"{type(answer).__name__} does not answer {type(message).__name__}", server=where)
        return answer

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = FrameReader(self.codec.max_frame_bytes)
        answered = False  # an answer beyond ApiVersions (which a SASL listener serves before a login)
        try:
            while data := await reader.read(1 << 16):
                for raw in frames.feed(data):
                    frame = self.codec.decode(raw)
                    if frame.kind is not FrameKind.RESPONSE:
                        raise FrameError(f"a request frame (api key {frame.api_key}) arrived at the client")
                    answered = answered or type(frame.message) is not ApiVersionsResponse
                    future = self._pending.get(frame.correlation_id)
                    if future is not None and not future.done():
                        future.set_result(frame.message)
        except FrameError as exc:
            failure = ProtocolError(f"bad frame from the server: {exc}", server=str(self.address))
        except (ConnectionError, OSError) as exc:
            failure = ConnectionLostError(f"connection error: {exc}", server=str(self.address))
        except asyncio.CancelledError:
            return
        else:
            reason = "connection closed by the server"
            if not answered and self.credentials is None:
                # A SASL listener closes the connection of a client that did not log in, answering
                # nothing when the request has no error field to carry ILLEGAL_SASL_STATE.
                reason += " before any answer (does this listener need --user and --password?)"
            failure = ConnectionLostError(reason, server=str(self.address))
        self._fail_all(failure)
        self._closed = True
        writer.close()

    def _fail_all(self, failure: KafkaError) -> None:
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(failure)

    async def close(self) -> None:
        self._closed = True
        self._fail_all(ConnectionLostError("the client closed the connection", server=str(self.address)))
        if self._reading is not None and self._reading is not asyncio.current_task():
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reading
        writer, self._writer = self._writer, None
        out, self._out = self._out, None
        if writer is not None:
            if out is not None:
                out.close()
            else:
                writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


class _Expired(Exception):
    """Set on a request's future when its deadline passes first (only `request` sees it)."""


def _expire(future: asyncio.Future[object]) -> None:
    if not future.done():
        future.set_exception(_Expired())


def api_key_of(message: object) -> int:
    return API_KEYS[type(message)]


__all__ = ["Address", "Connection", "api_key_of", "parse_addresses"]
