"""SASL/PLAIN authentication of one connection, as pure state machines (no I/O).

The runtime keeps one `SaslServerSession` per inbound connection and asks it about every request
frame before anything else sees it: the session answers the SASL requests itself, lets ApiVersions
through at any time (a client asks it before authenticating, as Kafka's clients do), refuses every
other request until the connection has authenticated, and then names the principal (`User:alice`)
the request runs as. A listener without SASL uses a session built with `users=None`: everything runs
as `User:ANONYMOUS` and the SASL requests are answered with ILLEGAL_SASL_STATE (as Kafka answers them
on a PLAINTEXT listener).

Server verdicts (Kafka's SaslServerAuthenticator, reduced to PLAIN):

| state            | request                      | verdict                                               |
| ---------------- | ---------------------------- | ----------------------------------------------------- |
| any              | ApiVersions                  | PASS (as the current principal)                       |
| HANDSHAKE        | SaslHandshake(PLAIN)         | ANSWER NONE -> AUTHENTICATE                           |
| HANDSHAKE        | SaslHandshake(other)         | REFUSE UNSUPPORTED_SASL_MECHANISM (lists PLAIN)       |
| AUTHENTICATE     | SaslAuthenticate(good)       | ANSWER NONE -> AUTHENTICATED as User:<name>           |
| AUTHENTICATE     | SaslAuthenticate(bad)        | REFUSE SASL_AUTHENTICATION_FAILED -> FAILED           |
| not AUTHENTICATED| any other request, or a SASL | REFUSE ILLEGAL_SASL_STATE (an error answer when the   |
|                  | request out of order         | response type has a top-level error code)             |
| AUTHENTICATED    | SaslHandshake/Authenticate   | ANSWER ILLEGAL_SASL_STATE (no re-authentication)      |
| AUTHENTICATED    | anything else                | PASS as User:<name>                                   |

REFUSE means: send the answer (if any), then close the connection.

The client side (`SaslClientSession`) produces the two requests and checks the two answers; the
admin client drives it over its connection.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from node.process.ports import ANONYMOUS
from node.protocol.errors import ErrorCode
from node.protocol.refusal import error_response
from node.protocol.session import (
    PLAIN,
    ApiVersionsRequest,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    parse_plain_auth_bytes,
    plain_auth_bytes,
)

USER_PREFIX = "User:"
MECHANISMS: tuple[str, ...] = (PLAIN,)
_BAD_CREDENTIALS = "Authentication failed: Invalid username or password"


def principal_of(username: str) -> str:
    """The principal a PLAIN user authenticates as."""
    return f"{USER_PREFIX}{username}"


def parse_users(text: str, where: str = "user list") -> dict[str, str]:
    """`"alice:secret,bob:pw"` -> {"alice": "secret", "bob": "pw"}; raises ValueError naming the bad entry.

    Entries are separated by commas and split at their first colon, so a password may contain colons
    but not commas; blanks around an entry are ignored. A user named twice is an error (which password
    would win is not obvious to whoever wrote the config).
    """
    users: dict[str, str] = {}
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        name, sep, password = entry.partition(":")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"{where}: entry '{entry}' is not NAME:PASSWORD")
        if name in users:
            raise ValueError(f"{where}: user '{name}' is listed twice")
        users[name] = password
    return users


class SaslState(Enum):
    HANDSHAKE = "handshake"  # waiting for SaslHandshake
    AUTHENTICATE = "authenticate"  # mechanism agreed, waiting for SaslAuthenticate
    AUTHENTICATED = "authenticated"
    FAILED = "failed"  # refused; the connection is being closed


class Verdict(Enum):
    PASS = "pass"  # hand the request to the node, running as `principal`
    ANSWER = "answer"  # send `response`, the session's own answer; the connection stays open
    REFUSE = "refuse"  # send `response` when there is one, then close the connection


@dataclass(frozen=True, slots=True)
class SessionStep:
    verdict: Verdict
    response: object | None = None
    principal: str = ANONYMOUS
    reason: str = ""  # why a request was refused, for the node's log


class SaslServerSession:
    """One inbound connection's authentication state (see the module docstring for the table)."""

    def __init__(self, users: Mapping[str, str] | None) -> None:
        """`users`: name -> password for a SASL_PLAINTEXT listener; None for a PLAINTEXT listener."""
        self._users = dict(users) if users is not None else None
        self._principal = ANONYMOUS
        self._state = SaslState.HANDSHAKE if users is not None else SaslState.AUTHENTICATED

    @property
    def state(self) -> SaslState:
        return self._state

    @property
    def principal(self) -> str:
        return self._principal

    @property
    def sasl_enabled(self) -> bool:
        return self._users is not None

    def receive(self, request: object) -> SessionStep:
        """What to do with one inbound request frame's message."""
        if self._state is SaslState.FAILED:
            return SessionStep(Verdict.REFUSE, reason="the connection already failed authentication")
        if isinstance(request, ApiVersionsRequest):
            return SessionStep(Verdict.PASS, principal=self._principal)
        if isinstance(request, SaslHandshakeRequest):
            return self._handshake(request)
        if isinstance(request, SaslAuthenticateRequest):
            return self._authenticate(request)
        if self._state is SaslState.AUTHENTICATED:
            return SessionStep(Verdict.PASS, principal=self._principal)
        return self._refuse(request, ErrorCode.ILLEGAL_SASL_STATE, f"{type(request).__name__} before authentication")

    def _handshake(self, request: SaslHandshakeRequest) -> SessionStep:
        if self._state is SaslState.AUTHENTICATED:
            return SessionStep(Verdict.ANSWER, SaslHandshakeResponse(ErrorCode.ILLEGAL_SASL_STATE, ()), self._principal)
        if self._state is not SaslState.HANDSHAKE:
            return self._refuse(request, ErrorCode.ILLEGAL_SASL_STATE, "a second SaslHandshake")
        if request.mechanism not in MECHANISMS:
            self._state = SaslState.FAILED
            return SessionStep(
                Verdict.REFUSE,
                SaslHandshakeResponse(ErrorCode.UNSUPPORTED_SASL_MECHANISM, MECHANISMS),
                reason=f"unsupported SASL mechanism '{request.mechanism}'",
            )
        self._state = SaslState.AUTHENTICATE
        return SessionStep(Verdict.ANSWER, SaslHandshakeResponse(ErrorCode.NONE, MECHANISMS))

    def _authenticate(self, request: SaslAuthenticateRequest) -> SessionStep:
        if self._state is SaslState.AUTHENTICATED:
            message = "SASL is not enabled on this listener" if self._users is None else "already authenticated"
            return SessionStep(
                Verdict.ANSWER, SaslAuthenticateResponse(ErrorCode.ILLEGAL_SASL_STATE, message), self._principal
            )
        if self._state is not SaslState.AUTHENTICATE:
            return self._refuse(request, ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake")
        assert self._users is not None
        parsed = parse_plain_auth_bytes(request.auth_bytes)
        if parsed is None:
            return self._fail("Authentication failed: malformed PLAIN message")
        authzid, username, password = parsed
        if authzid and authzid != username:
            return self._fail("Authentication failed: an authorization id other than the username is not allowed")
        expected = self._users.get(username)
        # compare_digest even for an unknown user, so the answer's timing does not tell which part was wrong
        matches = hmac.compare_digest(password.encode(), (expected if expected is not None else "").encode())
        if expected is None or not matches:
            return self._fail(_BAD_CREDENTIALS)
        self._state = SaslState.AUTHENTICATED
        self._principal = principal_of(username)
        return SessionStep(Verdict.ANSWER, SaslAuthenticateResponse(ErrorCode.NONE), self._principal)

    def _fail(self, message: str) -> SessionStep:
        self._state = SaslState.FAILED
        return SessionStep(
            Verdict.REFUSE, SaslAuthenticateResponse(ErrorCode.SASL_AUTHENTICATION_FAILED, message), reason=message
        )

    def _refuse(self, request: object, code: ErrorCode, reason: str) -> SessionStep:
        """Answer with `code` where the response type has a top-level error code, then close."""
        self._state = SaslState.FAILED
        try:
            response: object | None = error_response(request, code)
        except (TypeError, KeyError):  # per-resource errors only, or not a request at all: just close
            response = None
        return SessionStep(Verdict.REFUSE, response, reason=reason)


class SaslFailure(Exception):
    """The server refused this client's authentication; `error_code` is its ErrorCode."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class SaslClientSession:
    """The client's half of SASL/PLAIN: `first_request()`, then `on_response()` for each answer.

    `on_response` returns the next request to send, or None once authenticated; it raises SaslFailure
    when the server refuses (a definite failure: none of the client's own requests was sent yet).
    """

    def __init__(self, username: str, password: str) -> None:
        if not username:
            raise ValueError("a SASL/PLAIN username must not be empty")
        self.username = username
        self._password = password
        self._step = 0

    @property
    def principal(self) -> str:
        return principal_of(self.username)

    def first_request(self) -> SaslHandshakeRequest:
        self._step = 1
        return SaslHandshakeRequest(PLAIN)

    def on_response(self, response: object) -> SaslAuthenticateRequest | None:
        if self._step == 1 and isinstance(response, SaslHandshakeResponse):
            if response.error_code != ErrorCode.NONE:
                offered = ", ".join(response.mechanisms) or "none"
                raise SaslFailure(
                    response.error_code,
                    f"SASL handshake refused ({_name(response.error_code)}); the server offers: {offered}",
                )
            self._step = 2
            return SaslAuthenticateRequest(plain_auth_bytes(self.username, self._password))
        if self._step == 2 and isinstance(response, SaslAuthenticateResponse):
            if response.error_code != ErrorCode.NONE:
                detail = response.error_message or _name(response.error_code)
                raise SaslFailure(response.error_code, f"SASL authentication as '{self.username}' failed: {detail}")
            self._step = 3
            return None
        raise SaslFailure(
            ErrorCode.ILLEGAL_SASL_STATE, f"unexpected {type(response).__name__} during SASL step {self._step}"
        )


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


__all__ = [
    "MECHANISMS",
    "USER_PREFIX",
    "SaslClientSession",
    "SaslFailure",
    "SaslServerSession",
    "SaslState",
    "SessionStep",
    "Verdict",
    "parse_users",
    "principal_of",
]
