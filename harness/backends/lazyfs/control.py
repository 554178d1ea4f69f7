"""The lazyfs control protocol: one JSON object per line over a Unix stream socket, one reply per request.

Requests: {"cmd": "ping"} | {"cmd": "status"} | {"cmd": "power_loss", "torn_seed": null or an int} |
{"cmd": "sync"}. Replies: {"ok": true, ...the command's fields} or {"ok": false, "error": "why"}.
The socket lives in the lazyfs state dir (inside the run dir); paths longer than a sockaddr_un allows are
reached through /proc/self/fd, so a deep run dir is no problem.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.backends.shell import BackendError

Handler = Callable[[dict[str, Any]], dict[str, Any]]
_SUN_PATH_MAX = 100  # sockaddr_un holds 108 bytes; keep a margin


class LazyfsError(BackendError):
    """The lazyfs daemon could not be reached or refused a command; the message says which and why."""


@contextlib.contextmanager
def _short_path(path: Path) -> Iterator[str]:
    """A path to `path` that fits in a sockaddr_un (via an open descriptor of its directory if needed)."""
    if len(os.fsencode(path)) <= _SUN_PATH_MAX:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


class ControlServer:
    """Serves the control socket on a thread of its own; one connection at a time is plenty."""

    def __init__(self, path: Path, handlers: dict[str, Handler]) -> None:
        self.path = Path(path)
        self.handlers = handlers
        self.path.unlink(missing_ok=True)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with _short_path(self.path) as where:
            self._sock.bind(where)
        self._sock.listen(8)
        self._thread = threading.Thread(target=self._serve, name="lazyfs-control", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
        self.path.unlink(missing_ok=True)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            with conn, conn.makefile("rwb") as stream:
                for line in stream:
                    stream.write(json.dumps(self._answer(line)).encode() + b"\n")
                    stream.flush()

    def _answer(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
            handler = self.handlers[request["cmd"]]
        except (ValueError, KeyError, TypeError):
            return {"ok": False, "error": f"not a known command: {line[:200]!r}"}
        try:
            return {"ok": True, **handler(request)}
        except Exception as exc:  # the daemon must keep serving the file system whatever a command does
            return {"ok": False, "error": f"{request['cmd']}: {type(exc).__name__}: {exc}"}


class LazyfsClient:
    """Talks to one lazyfs daemon's control socket."""

    def __init__(self, path: Path | str, timeout: float = 120.0) -> None:
        self.path = Path(path)
        self.timeout = timeout

    def call(self, cmd: str, **args: Any) -> dict[str, Any]:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(self.timeout)
                with _short_path(self.path) as where:
                    sock.connect(where)
                with sock.makefile("rwb") as stream:
                    stream.write(json.dumps({"cmd": cmd, **args}).encode() + b"\n")
                    stream.flush()
                    line = stream.readline()
        except OSError as exc:
            raise LazyfsError(f"lazyfs control socket {self.path}: {cmd}: {exc}") from None
        if not line:
            raise LazyfsError(f"lazyfs control socket {self.path}: {cmd}: the daemon closed the connection")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise LazyfsError(f"lazyfs {self.path.parent}: {reply.get('error')}")
        reply.pop("ok")
        return reply

    def ping(self) -> dict[str, Any]:
        return self.call("ping")

    def status(self) -> dict[str, Any]:
        return self.call("status")

    def power_loss(self, torn_seed: int | None = None) -> dict[str, Any]:
        return self.call("power_loss", torn_seed=torn_seed)

    def sync(self) -> dict[str, Any]:
        return self.call("sync")
