"""Outbound connections: one TCP connection per peer, with reconnect backoff and request timeouts.

The core names requests by (destination, correlation id) and expects exactly one answer each: a
response, or `RequestFailed` when the request could not be delivered, its connection broke, or it ran
past `quorum.request.timeout.ms` (KIP-595: the request is failed and the connection dropped). After a
failed connect or a broken connection, reconnecting waits `quorum.retry.backoff.ms`, doubling up to
`quorum.retry.backoff.max.ms`; requests made while waiting fail at once (on the next loop turn, never
inside the caller) so the core's own retry logic decides what to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from node.protocol.codec import BinaryCodec, FrameError, FrameKind, FrameReader
from node.protocol.messages import FetchRequest, Request, Response
from node.runtime.frame_writer import FrameWriter
from node.security.sasl import SaslClientSession, SaslFailure

log = logging.getLogger(__name__)

OnResponse = Callable[[int, int, Response], None]  # source, correlation id, message
OnFailed = Callable[[int, int, bool], None]  # destination, correlation id, sent (False: never written)
OnResponses = Callable[[int, list[tuple[int, Response]]], None]  # source, the answers of one read, in order
MAX_PENDING_WRITE_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class Backoff:
    base_ms: int
    max_ms: int

    def delay_ms(self, failures: int) -> int:
        """KIP-580 style: base * 2^(failures-1), capped."""
        if failures <= 0:
            return 0
        return min(self.max_ms, self.base_ms * (1 << min(failures - 1, 30)))


async def sasl_plain_login(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, codec: BinaryCodec, username: str, password: str
) -> None:
    """SASL/PLAIN on a fresh connection before any other request; FrameError when refused."""
    frames = FrameReader(codec.max_frame_bytes)
    session = SaslClientSession(username, password)
    request: object | None = session.first_request()
    correlation_id = 0
    while request is not None:
        correlation_id += 1
        if writer.transport.is_closing():  # uvloop raises on a write to a closed transport
            raise FrameError("connection closed during SASL authentication")
        writer.write(codec.encode_request(correlation_id, request))
        await writer.drain()
        answer = None
        while answer is None:
            data = await reader.read(1 << 16)
            if not data:
                raise FrameError("connection closed during SASL authentication")
            for raw in frames.feed(data):
                answer = codec.decode(raw).message
        try:
            request = session.on_response(answer)
        except SaslFailure as exc:
            raise FrameError(str(exc)) from None


class PeerLink:
    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        codec: BinaryCodec,
        backoff: Backoff,
        request_timeout_ms: int,
        on_response: OnResponse,
        on_failed: OnFailed,
        login: tuple[str, str] | None = None,
        on_responses: OnResponses | None = None,
    ) -> None:
        """`on_responses`, when given, gets the answers that arrive in one read together (several
        answers are then one event for the node instead of one each); else `on_response` each."""
        self.node_id = node_id
        self.on_responses = on_responses
        self.login = login  # SASL/PLAIN (username, password) for a SASL_PLAINTEXT listener
        self.host = host
        self.port = port
        self.codec = codec
        self.backoff = backoff
        self.request_timeout_ms = request_timeout_ms
        self.on_response = on_response
        self.on_failed = on_failed
        self._writer: asyncio.StreamWriter | None = None
        self._out: FrameWriter | None = None  # the requests of one loop turn leave in one send
        self._connecting: asyncio.Task[None] | None = None
        self._reading: asyncio.Task[None] | None = None
        self._queued: list[tuple[int, bytes, float]] = []  # waiting for the connection
        self._inflight: dict[int, asyncio.TimerHandle] = {}
        self._parked: set[int] = set()  # in-flight Fetches, which the leader may hold for max_wait_ms
        self._failures = 0
        self._retry_at = 0.0  # time.monotonic() before which we do not reconnect
        self._closed = False

    @property
    def awaiting_answers(self) -> bool:
        """Requests other than Fetches are waiting (what a shutdown wants to see answered)."""
        return bool(self._queued) or any(cid not in self._parked for cid in self._inflight)

    def send(self, correlation_id: int, msg: Request) -> None:
        loop = asyncio.get_running_loop()
        try:
            frame = self.codec.encode_request(correlation_id, msg)
        except (ValueError, TypeError) as exc:
            log.error("cannot encode %s for node %d: %s", type(msg).__name__, self.node_id, exc)
            loop.call_soon(self.on_failed, self.node_id, correlation_id, False)
            return
        timeout = (self.request_timeout_ms + getattr(msg, "max_wait_ms", 0)) / 1000
        if self._writer is None and (self._closed or (self._connecting is None and time.monotonic() < self._retry_at)):
            loop.call_soon(self.on_failed, self.node_id, correlation_id, False)
            return
        if isinstance(msg, FetchRequest):
            self._parked.add(correlation_id)
        if self._writer is not None:
            self._write(correlation_id, frame, timeout)
        else:
            self._queued.append((correlation_id, frame, timeout))
            if self._connecting is None:
                self._connecting = loop.create_task(self._connect())

    def _write(self, correlation_id: int, frame: bytes, timeout: float) -> None:
        assert self._out is not None
        if self._out.buffered_bytes > MAX_PENDING_WRITE_BYTES:
            self._broken("peer is not reading (write buffer full)")
            self._parked.discard(correlation_id)
            asyncio.get_running_loop().call_soon(self.on_failed, self.node_id, correlation_id, False)
            return
        loop = asyncio.get_running_loop()
        old = self._inflight.pop(correlation_id, None)
        if old is not None:
            old.cancel()
        self._inflight[correlation_id] = loop.call_later(timeout, self._timed_out, correlation_id)
        self._out.write(frame)

    async def _connect(self) -> None:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), self.request_timeout_ms / 1000
            )
            if self.login is not None:
                try:
                    await asyncio.wait_for(
                        sasl_plain_login(reader, writer, self.codec, *self.login), self.request_timeout_ms / 1000
                    )
                except BaseException:
                    writer.close()
                    raise
        except (OSError, TimeoutError, FrameError) as exc:
            self._connecting = None
            self._note_failure(f"cannot connect: {exc or type(exc).__name__}")
            queued, self._queued = self._queued, []
            for correlation_id, _, _ in queued:
                self._parked.discard(correlation_id)
                self.on_failed(self.node_id, correlation_id, False)
            return
        self._connecting = None
        if self._closed:
            writer.close()
            return
        self._writer = writer
        self._out = FrameWriter(writer)
        log.info("connected to node %d at %s:%d", self.node_id, self.host, self.port)
        self._reading = asyncio.get_running_loop().create_task(self._read(reader, writer))
        queued, self._queued = self._queued, []
        for correlation_id, frame, timeout in queued:
            if self._writer is None:  # broke while flushing the queue
                self._parked.discard(correlation_id)
                self.on_failed(self.node_id, correlation_id, False)
            else:
                self._write(correlation_id, frame, timeout)

    def _note_failure(self, reason: str) -> None:
        self._failures += 1
        delay = self.backoff.delay_ms(self._failures)
        self._retry_at = time.monotonic() + delay / 1000
        level = logging.INFO if self._failures == 1 else logging.DEBUG
        log.log(level, "node %d at %s:%d: %s; retry in %d ms", self.node_id, self.host, self.port, reason, delay)

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = FrameReader(self.codec.max_frame_bytes)
        reason = "connection closed by peer"
        try:
            while data := await reader.read(1 << 16):
                answers: list[tuple[int, Response]] = []
                try:
                    for raw in frames.feed(data):
                        frame = self.codec.decode(raw)
                        if frame.kind is not FrameKind.RESPONSE:
                            raise FrameError("a request frame arrived on an outbound connection")
                        timer = self._inflight.pop(frame.correlation_id, None)
                        self._parked.discard(frame.correlation_id)
                        if timer is None:
                            continue  # answer to a request that already timed out
                        timer.cancel()
                        self._failures = 0
                        answers.append((frame.correlation_id, frame.message))  # type: ignore[arg-type]
                finally:  # those taken out of the in-flight set are delivered, even if a later frame is bad
                    self._deliver(answers)
                if self._writer is not writer:
                    return  # a callback closed this connection
        except FrameError as exc:
            reason = f"bad frame from peer: {exc}"
            log.warning("node %d: %s; closing the connection", self.node_id, reason)
        except (ConnectionError, OSError) as exc:
            reason = f"connection error: {exc}"
        except asyncio.CancelledError:
            return
        if self._writer is writer:
            self._broken(reason)

    def _deliver(self, answers: list[tuple[int, Response]]) -> None:
        if self.on_responses is not None and len(answers) > 1:
            self.on_responses(self.node_id, answers)
            return
        for correlation_id, message in answers:
            self.on_response(self.node_id, correlation_id, message)

    def _timed_out(self, correlation_id: int) -> None:
        self._inflight.pop(correlation_id, None)
        self._parked.discard(correlation_id)
        log.warning("node %d: request %d timed out; dropping the connection", self.node_id, correlation_id)
        self.on_failed(self.node_id, correlation_id, True)
        self._broken(f"request {correlation_id} timed out")

    def _broken(self, reason: str) -> None:
        """Drop the connection and fail everything in flight on it."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        out, self._out = self._out, None
        if out is not None:
            out.close()
        else:
            writer.close()
        if self._reading is not None and self._reading is not asyncio.current_task():
            self._reading.cancel()
        self._reading = None
        self._note_failure(reason)
        inflight, self._inflight = self._inflight, {}
        self._parked.clear()
        for correlation_id, timer in inflight.items():
            timer.cancel()
            self.on_failed(self.node_id, correlation_id, True)

    async def close(self) -> None:
        """Close without reporting failures (the node is going away)."""
        self._closed = True
        for timer in self._inflight.values():
            timer.cancel()
        self._inflight.clear()
        self._queued.clear()
        if self._connecting is not None:
            self._connecting.cancel()
        if self._reading is not None:
            self._reading.cancel()
        writer, self._writer = self._writer, None
        out, self._out = self._out, None
        if writer is not None:
            if out is not None:
                out.close()
            else:
                writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
