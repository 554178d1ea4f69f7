"""The SASL/PLAIN session state machines: both verdicts of every step, and the client driving the server."""

from __future__ import annotations

import pytest

from node.process.ports import ANONYMOUS
from node.protocol.acls import CreateAclsRequest
from node.protocol.admin import CreateTopicsRequest, DescribeClusterRequest, DescribeClusterResponse
from node.protocol.errors import ErrorCode
from node.protocol.session import (
    ApiVersionsRequest,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    plain_auth_bytes,
)
from node.security.sasl import (
    SaslClientSession,
    SaslFailure,
    SaslServerSession,
    SaslState,
    Verdict,
    parse_users,
)

USERS = {"alice": "secret", "bob": "p:w"}


def authenticated(username: str = "alice", password: str = "secret") -> SaslServerSession:
    session = SaslServerSession(USERS)
    assert session.receive(SaslHandshakeRequest("PLAIN")).verdict is Verdict.ANSWER
    step = session.receive(SaslAuthenticateRequest(plain_auth_bytes(username, password)))
    assert step.verdict is Verdict.ANSWER and step.response == SaslAuthenticateResponse(ErrorCode.NONE)
    return session


def test_parse_users_splits_entries_at_the_first_colon():
    assert parse_users(" alice:secret , bob:p:w,,") == USERS
    assert parse_users("") == {}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("alice", "'alice' is not NAME:PASSWORD"),
        (":pw", "':pw' is not NAME:PASSWORD"),
        ("a:1,a:2", "'a' is listed twice"),
    ],
)
def test_parse_users_names_the_bad_entry(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_users(text, where="sasl.users")


def test_good_credentials_authenticate_as_user_principal():
    session = authenticated()
    assert session.state is SaslState.AUTHENTICATED
    step = session.receive(DescribeClusterRequest())
    assert (step.verdict, step.principal) == (Verdict.PASS, "User:alice")


def test_password_with_colon_and_matching_authzid_are_accepted():
    session = SaslServerSession(USERS)
    session.receive(SaslHandshakeRequest("PLAIN"))
    step = session.receive(SaslAuthenticateRequest(plain_auth_bytes("bob", "p:w", authzid="bob")))
    assert step.response.error_code == ErrorCode.NONE and session.principal == "User:bob"


@pytest.mark.parametrize(
    "auth_bytes",
    [
        plain_auth_bytes("alice", "wrong"),
        plain_auth_bytes("mallory", "secret"),
        plain_auth_bytes("alice", "secret", authzid="bob"),  # acting as someone else
        b"alice\0secret",  # not PLAIN's three fields
        b"\xff\0alice\0secret",  # not UTF-8
    ],
)
def test_bad_credentials_are_refused_and_the_connection_stays_refused(auth_bytes):
    session = SaslServerSession(USERS)
    session.receive(SaslHandshakeRequest("PLAIN"))
    step = session.receive(SaslAuthenticateRequest(auth_bytes))
    assert step.verdict is Verdict.REFUSE
    assert step.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert session.principal == ANONYMOUS
    assert session.receive(DescribeClusterRequest()).verdict is Verdict.REFUSE


def test_unknown_user_and_wrong_password_get_the_same_message():
    answers = []
    for username, password in (("alice", "wrong"), ("mallory", "secret")):
        session = SaslServerSession(USERS)
        session.receive(SaslHandshakeRequest("PLAIN"))
        answers.append(session.receive(SaslAuthenticateRequest(plain_auth_bytes(username, password))).response)
    assert answers[0] == answers[1]


def test_only_plain_is_offered():
    session = SaslServerSession(USERS)
    step = session.receive(SaslHandshakeRequest("SCRAM-SHA-256"))
    assert step.verdict is Verdict.REFUSE
    assert step.response == SaslHandshakeResponse(ErrorCode.UNSUPPORTED_SASL_MECHANISM, ("PLAIN",))


def test_requests_before_authentication_are_refused_with_illegal_sasl_state():
    session = SaslServerSession(USERS)
    assert session.receive(ApiVersionsRequest()).verdict is Verdict.PASS  # allowed first, as Kafka allows it
    step = session.receive(DescribeClusterRequest())
    assert step.verdict is Verdict.REFUSE
    assert isinstance(step.response, DescribeClusterResponse)
    assert step.response.error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_a_request_with_only_per_resource_errors_is_refused_without_an_answer():
    step = SaslServerSession(USERS).receive(CreateTopicsRequest(()))
    assert (step.verdict, step.response) == (Verdict.REFUSE, None)


def test_sasl_steps_out_of_order_are_refused():
    session = SaslServerSession(USERS)
    step = session.receive(SaslAuthenticateRequest(plain_auth_bytes("alice", "secret")))
    assert step.verdict is Verdict.REFUSE and step.response.error_code == ErrorCode.ILLEGAL_SASL_STATE
    session = SaslServerSession(USERS)
    session.receive(SaslHandshakeRequest("PLAIN"))
    assert session.receive(SaslHandshakeRequest("PLAIN")).verdict is Verdict.REFUSE


def test_no_reauthentication_after_success():
    session = authenticated()
    step = session.receive(SaslAuthenticateRequest(plain_auth_bytes("bob", "p:w")))
    assert step.verdict is Verdict.ANSWER and step.response.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert session.principal == "User:alice"


def test_plaintext_listener_runs_everything_as_anonymous():
    session = SaslServerSession(None)
    assert session.receive(CreateAclsRequest(())).principal == ANONYMOUS
    step = session.receive(SaslHandshakeRequest("PLAIN"))
    assert step.verdict is Verdict.ANSWER and step.response.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert session.receive(DescribeClusterRequest()).verdict is Verdict.PASS


def drive(client: SaslClientSession, server: SaslServerSession) -> None:
    request: object | None = client.first_request()
    while request is not None:
        request = client.on_response(server.receive(request).response)


def test_client_session_authenticates_against_the_server_session():
    server = SaslServerSession(USERS)
    client = SaslClientSession("alice", "secret")
    drive(client, server)
    assert server.principal == client.principal == "User:alice"


@pytest.mark.parametrize(("password", "code"), [("wrong", ErrorCode.SASL_AUTHENTICATION_FAILED)])
def test_client_session_raises_the_servers_refusal(password, code):
    with pytest.raises(SaslFailure) as caught:
        drive(SaslClientSession("alice", password), SaslServerSession(USERS))
    assert caught.value.error_code == code and "Invalid username or password" in str(caught.value)


def test_client_session_raises_when_sasl_is_off():
    with pytest.raises(SaslFailure) as caught:
        drive(SaslClientSession("alice", "secret"), SaslServerSession(None))
    assert caught.value.error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_client_session_rejects_an_unexpected_answer():
    client = SaslClientSession("alice", "secret")
    client.first_request()
    with pytest.raises(SaslFailure, match="unexpected"):
        client.on_response(SaslAuthenticateResponse(ErrorCode.NONE))
