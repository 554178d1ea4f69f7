"""The admin client's errors: one hierarchy, and every error says whether its request may have happened.

A history records a failed operation as `fail` (it certainly did not happen) or `info` (it may have
happened, now or at any later time). `KafkaError.definite` is that distinction, decided here once:

| what went wrong                                                | error                   | definite |
| -------------------------------------------------------------- | ----------------------- | -------- |
| the server answered an error code (per request or resource)    | ServerError subclasses  | True     |
| ... except REQUEST_TIMED_OUT (a forwarding broker lost track   | RequestTimedOutError,   | False    |
|     of a forwarded write), UNKNOWN_SERVER_ERROR (the server    | UnknownServerError,     |          |
|     could not classify its failure), NETWORK_EXCEPTION         | ServerNetworkError      |          |
| cannot connect: refused, unreachable, connect timeout          | ConnectError            | True     |
| SASL handshake/authentication refused (before any request)     | AuthenticationError     | True     |
| the server does not serve the API (per its ApiVersions)        | UnsupportedApiError     | True     |
| the request cannot be encoded (too large, bad field)           | InvalidRequestError     | True     |
| the deadline passed before the request was written             | ClientTimeoutError      | True     |
| no answer before the deadline after the request was written    | ClientTimeoutError      | False    |
| the connection broke after the request was written             | ConnectionLostError     | False    |
| the answer could not be decoded                                | ProtocolError           | False    |

"Written" means handed to the socket: from then on the server may have received and applied the
request even if its answer never arrives. The client retries a request on another server only after
a definite failure (or, for reads, after any failure): a write with an unknown outcome is never sent
twice, so it is applied at most once.
"""

from __future__ import annotations

from node.protocol.errors import ErrorCode

# Server answers that do not tell whether the request was applied.
AMBIGUOUS_CODES: frozenset[int] = frozenset(
    {ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.NETWORK_EXCEPTION}
)


def code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"


class KafkaError(Exception):
    """Any failure of an admin client call.

    `code`: Kafka's error code (a client-side failure uses the closest one: NETWORK_EXCEPTION,
    REQUEST_TIMED_OUT, ...); `definite`: True when the request certainly did not take effect;
    `server`: the "host:port" involved, when one was; `resource`: the topic, config resource or ACL
    the error belongs to, for a per-resource error.
    """

    def __init__(
        self,
        code: int,
        message: str = "",
        *,
        definite: bool,
        server: str | None = None,
        resource: str | None = None,
    ) -> None:
        self.code = int(code)
        self.message = message
        self.definite = definite
        self.server = server
        self.resource = resource
        super().__init__(self._describe())

    @property
    def name(self) -> str:
        return code_name(self.code)

    @property
    def retriable(self) -> bool:
        """Kafka's retriable family (the same request may succeed when tried again)."""
        try:
            return ErrorCode(self.code).retriable
        except ValueError:
            return False

    def _describe(self) -> str:
        where = f" [{self.resource}]" if self.resource else ""
        at = f" (from {self.server})" if self.server else ""
        text = f"{self.name}{where}: {self.message}" if self.message else f"{self.name}{where}"
        return text + at

    def __reduce__(self):  # keep the keyword-only fields when pickled (e.g. across processes)
        return (_rebuild, (type(self), self.code, self.message, self.definite, self.server, self.resource))


def _rebuild(cls, code, message, definite, server, resource):  # type: ignore[no-untyped-def]
    err = KafkaError.__new__(cls)
    KafkaError.__init__(err, code, message, definite=definite, server=server, resource=resource)
    return err


# --- answered by a server ------------------------------------------------------------------------


class ServerError(KafkaError):
    """The server answered with an error code; definite unless the code is in AMBIGUOUS_CODES."""


class NotControllerError(ServerError):
    pass


class AuthenticationError(ServerError):
    """SASL refused: bad credentials, an unsupported mechanism, or a request before authenticating."""


class AuthorizationError(ServerError):
    """An ACL denied the request (TOPIC_ or CLUSTER_AUTHORIZATION_FAILED)."""


class TopicAlreadyExistsError(ServerError):
    pass


class UnknownTopicError(ServerError):
    """UNKNOWN_TOPIC_OR_PARTITION or UNKNOWN_TOPIC_ID."""


class InvalidConfigError(ServerError):
    pass


class InvalidRequestError(ServerError):
    """INVALID_REQUEST from the server, or a request the client could not encode (never sent)."""


class StaleBrokerEpochError(ServerError):
    pass


class DuplicateBrokerRegistrationError(ServerError):
    pass


class BrokerNotAvailableError(ServerError):
    pass


class RequestTimedOutError(ServerError):
    """REQUEST_TIMED_OUT answered by a server (a forwarded write whose fate it does not know)."""


class UnknownServerError(ServerError):
    pass


class ServerNetworkError(ServerError):
    """NETWORK_EXCEPTION answered by a server (its own connection onwards broke)."""


_BY_CODE: dict[int, type[ServerError]] = {
    ErrorCode.NOT_CONTROLLER: NotControllerError,
    ErrorCode.SASL_AUTHENTICATION_FAILED: AuthenticationError,
    ErrorCode.UNSUPPORTED_SASL_MECHANISM: AuthenticationError,
    ErrorCode.ILLEGAL_SASL_STATE: AuthenticationError,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: AuthorizationError,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: AuthorizationError,
    ErrorCode.TOPIC_ALREADY_EXISTS: TopicAlreadyExistsError,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: UnknownTopicError,
    ErrorCode.UNKNOWN_TOPIC_ID: UnknownTopicError,
    ErrorCode.INVALID_CONFIG: InvalidConfigError,
    ErrorCode.INVALID_REQUEST: InvalidRequestError,
    ErrorCode.STALE_BROKER_EPOCH: StaleBrokerEpochError,
    ErrorCode.DUPLICATE_BROKER_REGISTRATION: DuplicateBrokerRegistrationError,
    ErrorCode.BROKER_NOT_AVAILABLE: BrokerNotAvailableError,
    ErrorCode.REQUEST_TIMED_OUT: RequestTimedOutError,
    ErrorCode.UNKNOWN_SERVER_ERROR: UnknownServerError,
    ErrorCode.NETWORK_EXCEPTION: ServerNetworkError,
}


def server_error(
    code: int, message: str | None = None, *, server: str | None = None, resource: str | None = None
) -> ServerError:
    """The typed error for an error code a server answered (see the module's table for `definite`)."""
    cls = _BY_CODE.get(int(code), ServerError)
    return cls(code, message or "", definite=int(code) not in AMBIGUOUS_CODES, server=server, resource=resource)


# --- decided by the client -----------------------------------------------------------------------


class ClientError(KafkaError):
    """A failure the client observed itself, without an error answer from a server."""


class ConnectError(ClientError):
    """No connection could be made (refused, unreachable, connect timeout): nothing was sent."""

    def __init__(self, message: str, *, server: str | None = None) -> None:
        super().__init__(ErrorCode.NETWORK_EXCEPTION, message, definite=True, server=server)


class ConnectionLostError(ClientError):
    """The connection broke after the request was written: it may have been applied."""

    def __init__(self, message: str, *, server: str | None = None) -> None:
        super().__init__(ErrorCode.NETWORK_EXCEPTION, message, definite=False, server=server)


class ClientTimeoutError(ClientError):
    """The call's deadline passed; `definite` says whether the request had been written by then."""

    def __init__(self, message: str, *, sent: bool, server: str | None = None) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message, definite=not sent, server=server)


class ProtocolError(ClientError):
    """The answer to a written request could not be decoded or did not match it."""

    def __init__(self, message: str, *, server: str | None = None) -> None:
        super().__init__(ErrorCode.CORRUPT_MESSAGE, message, definite=False, server=server)


class UnsupportedApiError(ClientError):
    """No reachable server serves this API (per its ApiVersions answer): the request was not sent."""

    def __init__(self, message: str, *, server: str | None = None) -> None:
        super().__init__(ErrorCode.UNSUPPORTED_VERSION, message, definite=True, server=server)


def unencodable(message: str) -> InvalidRequestError:
    """A request the client refused to send because it cannot be encoded."""
    return InvalidRequestError(ErrorCode.INVALID_REQUEST, f"not sent: {message}", definite=True)


__all__ = [
    "AMBIGUOUS_CODES",
    "AuthenticationError",
    "AuthorizationError",
    "BrokerNotAvailableError",
    "ClientError",
    "ClientTimeoutError",
    "ConnectError",
    "ConnectionLostError",
    "DuplicateBrokerRegistrationError",
    "InvalidConfigError",
    "InvalidRequestError",
    "KafkaError",
    "NotControllerError",
    "ProtocolError",
    "RequestTimedOutError",
    "ServerError",
    "ServerNetworkError",
    "StaleBrokerEpochError",
    "TopicAlreadyExistsError",
    "UnknownServerError",
    "UnknownTopicError",
    "UnsupportedApiError",
    "code_name",
    "server_error",
    "unencodable",
]
