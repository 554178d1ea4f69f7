"""Connection-level APIs: SASL/PLAIN authentication and ApiVersions.

A client on a SASL listener sends SaslHandshake (mechanism "PLAIN") and then SaslAuthenticate whose
`auth_bytes` are PLAIN's `authzid NUL authcid NUL password`; until that succeeds the listener answers
nothing else. ApiVersions tells a client which API keys and versions the node speaks.
"""

from __future__ import annotations

from dataclasses import dataclass

PLAIN = "PLAIN"


@dataclass(frozen=True, slots=True)
class SaslHandshakeRequest:
    mechanism: str


@dataclass(frozen=True, slots=True)
class SaslHandshakeResponse:
    error_code: int
    mechanisms: tuple[str, ...] = (PLAIN,)  # what the listener enables


@dataclass(frozen=True, slots=True)
class SaslAuthenticateRequest:
    auth_bytes: bytes


@dataclass(frozen=True, slots=True)
class SaslAuthenticateResponse:
    error_code: int
    error_message: str | None = None
    auth_bytes: bytes = b""


@dataclass(frozen=True, slots=True)
class ApiVersionsRequest:
    pass


@dataclass(frozen=True, slots=True)
class ApiVersion:
    api_key: int
    min_version: int
    max_version: int


@dataclass(frozen=True, slots=True)
class ApiVersionsResponse:
    error_code: int
    api_keys: tuple[ApiVersion, ...] = ()


def plain_auth_bytes(username: str, password: str, authzid: str = "") -> bytes:
    """SASL/PLAIN's initial response (RFC 4616)."""
    return f"{authzid}\0{username}\0{password}".encode()


def parse_plain_auth_bytes(data: bytes) -> tuple[str, str, str] | None:
    """(authzid, username, password), or None when `data` is not a well-formed PLAIN message."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return None
    parts = text.split("\0")
    if len(parts) != 3 or not parts[1]:
        return None
    return parts[0], parts[1], parts[2]


__all__ = [
    "PLAIN",
    "ApiVersion",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "SaslAuthenticateRequest",
    "SaslAuthenticateResponse",
    "SaslHandshakeRequest",
    "SaslHandshakeResponse",
    "parse_plain_auth_bytes",
    "plain_auth_bytes",
]
