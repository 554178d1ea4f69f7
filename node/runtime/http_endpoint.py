"""A tiny asyncio HTTP/1.1 server for the metrics endpoint (and the test-only append endpoint).

Prometheus only needs `GET /metrics`; pulling in a web framework for that is not worth it. Requests
are read with a size cap, keep-alive is honoured, and anything malformed gets a 400 and a closed
connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

MAX_HEADER_BYTES = 16 * 1024
MAX_BODY_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


Handler = Callable[[bytes], Awaitable[HttpResponse]]
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class HttpEndpoint:
    def __init__(self, host: str, port: int, routes: dict[tuple[str, str], Handler]) -> None:
        self.host = host
        self.port = port
        self.routes = routes
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._connections):
            writer.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        try:
            while True:
                request = await self._read_request(reader)
                if request is None:
                    break
                method, path, body, keep_alive = request
                response = await self._dispatch(method, path, body)
                self._write(writer, response, keep_alive)
                await writer.drain()
                if not keep_alive:
                    break
        except _BadRequest as exc:
            self._write(writer, HttpResponse(400, f"{exc}\n".encode()), keep_alive=False)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._connections.discard(writer)
            writer.close()

    async def _dispatch(self, method: str, path: str, body: bytes) -> HttpResponse:
        path = path.split("?", 1)[0]
        handler = self.routes.get((method, path))
        if handler is not None:
            try:
                return await handler(body)
            except Exception as exc:  # a bug in one handler must not kill the endpoint
                log.exception("HTTP %s %s failed", method, path)
                return HttpResponse(500, f"internal error: {exc!r}\n".encode())
        if any(p == path for _, p in self.routes):
            return HttpResponse(405, b"method not allowed\n")
        return HttpResponse(404, b"not found\n")

    async def _read_request(self, reader: asyncio.StreamReader) -> tuple[str, str, bytes, bool] | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip():
                raise _BadRequest("truncated request") from None
            return None
        except asyncio.LimitOverrunError:
            raise _BadRequest("request header too large") from None
        if len(head) > MAX_HEADER_BYTES:
            raise _BadRequest("request header too large")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise _BadRequest("malformed request line")
        method, path, version = parts
        headers = {}
        for line in lines[1:]:
            if line:
                name, sep, value = line.partition(":")
                if not sep:
                    raise _BadRequest("malformed header")
                headers[name.strip().lower()] = value.strip()
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            raise _BadRequest("bad Content-Length") from None
        if not 0 <= length <= MAX_BODY_BYTES:
            raise _BadRequest("body too large")
        body = await reader.readexactly(length) if length else b""
        connection = headers.get("connection", "").lower()
        keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
        return method, path, body, keep_alive

    @staticmethod
    def _write(writer: asyncio.StreamWriter, response: HttpResponse, keep_alive: bool) -> None:
        if writer.transport.is_closing():  # the node stopped while the handler ran: uvloop would raise
            return
        reason = _REASONS.get(response.status, "Error")
        head = (
            f"HTTP/1.1 {response.status} {reason}\r\n"
            f"Content-Type: {response.content_type}\r\n"
            f"Content-Length: {len(response.body)}\r\n"
            f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
        )
        writer.write(head.encode("latin-1") + response.body)


class _BadRequest(Exception):
    pass
