"""The forger's quorum kinds (what the fuzzer found), sent to a real process core: each is refused
with a code the forgery checker counts as a refusal."""

from __future__ import annotations

import random
from types import SimpleNamespace

from checkers.forgery import EXPECTED
from harness.forger import KINDS
from harness.fuzz.inprocess import NodeUnderTest
from node.protocol.codec import BinaryCodec
from node.protocol.errors import ErrorCode
from node.raft.actions import Respond
from node.raft.quorum_state import Role
from tests.fuzz.test_quorum_refusals import COMBINED
from tests.raft.helpers import make_leader, one, request

FOUND = (
    "end-quorum-epoch-from-non-voter",
    "vote-from-non-voter",
    "begin-quorum-epoch-at-int32-max",
    "replayed-vote-of-past-epoch",
)
QUORUM_KINDS = [k for k in KINDS if k.name in FOUND]


def test_each_quorum_kind_is_refused_as_the_checker_expects_and_changes_nothing():
    assert {k.name for k in QUORUM_KINDS} == set(FOUND) and all(k.listener == "controller" for k in QUORUM_KINDS)
    node = NodeUnderTest.from_properties(COMBINED, seed=3)
    for _ in range(200):
        node.advance(50)
    assert node.raft.role is Role.LEADER and node.raft.epoch >= 1
    epoch = node.raft.epoch
    forger = SimpleNamespace(rng=random.Random(1), voter_ids=(1,), cluster_id=node.raft.cluster_id)
    codec = BinaryCodec()
    for n, kind in enumerate(QUORUM_KINDS):
        request, _ = kind.build(forger, n, f"m{n}")
        token = ("forger", n)
        node.feed_frame("CONTROLLER", codec.encode_request(n, request), token)
        assert node.answered.get(token) == 1, kind.name
    for _ in range(200):
        node.advance(50)
    assert node.raft.epoch == epoch and node.raft.role is Role.LEADER


def test_the_answers_carry_the_expected_codes():
    leader, _ = make_leader(1)
    forger = SimpleNamespace(rng=random.Random(1), voter_ids=(1, 2, 3), cluster_id=None)
    for n, kind in enumerate(QUORUM_KINDS):
        message, _ = kind.build(forger, n, f"m{n}")
        code = ErrorCode(one(request(leader, 1000 + n, message), Respond).message.error_code)
        assert code.name in EXPECTED[kind.name], (kind.name, code)
