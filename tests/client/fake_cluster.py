"""A test double of the cluster for the admin client's tests: real TCP servers on 127.0.0.1 speaking
BinaryCodec frames, whose answers a test scripts. They run in their own thread and event loop, so both
the asyncio client (in `asyncio.run`) and the blocking client or the CLI can talk to them.

ApiVersions is answered from `api_keys` (the endpoint's APIs); with `users`, the real
`SaslServerSession` guards every connection. Every other request goes to the test's `answer` function,
which returns a response, HANG (never answer) or CLOSE (drop the connection without answering).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from node.protocol.codec import BinaryCodec, FrameKind, FrameReader
from node.protocol.errors import ErrorCode
from node.protocol.registry import API_NAMES
from node.protocol.session import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from node.security.sasl import SaslServerSession, Verdict

HANG = object()
CLOSE = object()
Answer = Callable[[Any], Any]


@dataclass
class Received:
    message: Any
    principal: str


@dataclass
class FakeServer:
    answer: Answer
    api_keys: Collection[int] | None = None  # None: every API
    users: dict[str, str] | None = None
    port: int = 0
    received: list[Received] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def requests(self, cls: type | None = None) -> list[Any]:
        return [r.message for r in self.received if cls is None or isinstance(r.message, cls)]

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        codec = BinaryCodec()
        frames = FrameReader()
        session = SaslServerSession(self.users)
        try:
            while data := await reader.read(1 << 16):
                for raw in frames.feed(data):
                    frame = codec.decode(raw)
                    assert frame.kind is FrameKind.REQUEST
                    step = session.receive(frame.message)
                    if step.verdict is not Verdict.PASS:
                        if step.response is not None:
                            writer.write(codec.encode_response(frame.correlation_id, step.response))
                        if step.verdict is Verdict.REFUSE:
                            await writer.drain()
                            return
                        continue
                    if isinstance(frame.message, ApiVersionsRequest):
                        keys = sorted(API_NAMES if self.api_keys is None else self.api_keys)
                        reply: Any = ApiVersionsResponse(ErrorCode.NONE, tuple(ApiVersion(k, 0, 0) for k in keys))
                    else:
                        self.received.append(Received(frame.message, step.principal))
                        reply = self.answer(frame.message)
                    if reply is CLOSE:
                        return
                    if reply is not HANG:
                        writer.write(codec.encode_response(frame.correlation_id, reply))
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()


class FakeCluster:
    """Servers in a background event loop; use as a context manager."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._servers: list[asyncio.Server] = []

    def __enter__(self) -> FakeCluster:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        async def stop() -> None:
            for server in self._servers:
                server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()

    def add(
        self, answer: Answer, *, api_keys: Collection[int] | None = None, users: dict[str, str] | None = None
    ) -> FakeServer:
        fake = FakeServer(answer, api_keys, users)

        async def start() -> int:
            server = await asyncio.start_server(fake.serve, "127.0.0.1", 0)
            self._servers.append(server)
            return server.sockets[0].getsockname()[1]

        fake.port = asyncio.run_coroutine_threadsafe(start(), self.loop).result(5)
        return fake


__all__ = ["CLOSE", "HANG", "FakeCluster", "FakeServer", "Received"]
