"""The `kafka` target: requests in Kafka's own framing, sampled from the layouts, through the node."""

from __future__ import annotations

import random
from collections import Counter

from harness.fuzz import runner
from harness.fuzz.kafka import KafkaTarget, kafka_request
from harness.fuzz.real_node import KAFKA_HINTS
from node.protocol.codec import FrameError
from node.protocol.kafka_codec import KafkaCodec


def test_sampled_requests_decode_for_every_api_and_version_each_listener_serves():
    """The sampler is worth running only if most of what it writes gets past the header into the
    handlers: every (API, version) served is met, and decodes, within a few thousand samples."""
    target = KafkaTarget(seed=3)
    for listener, codec in target.node.kafka_codecs.items():
        rng = random.Random(listener)
        served = {(key, v) for key, (req, _) in codec.layouts.items() for v in range(req.served[0], req.served[1] + 1)}
        decoded: Counter[tuple[int, int]] = Counter()
        for cid in range(1, 6001):
            frame, _ = kafka_request(codec, rng, target._hints(), cid)
            try:
                request = codec.decode_request(frame)
            except FrameError:
                continue
            decoded[(request.header.api_key, request.header.api_version)] += 1
        assert served <= set(decoded), (listener, sorted(served - set(decoded)))


def test_a_short_run_of_the_kafka_target_gets_answers_in_the_clients_version():
    report = runner.run(seed=11, max_inputs=400, targets=("kafka",))
    assert not report.findings, report.lines()
    stats = report.stats["kafka"]
    assert stats.inputs == 400 and stats.refused < stats.inputs / 2, stats


def test_an_answer_the_kafka_framing_cannot_carry_is_a_finding(monkeypatch):
    """The check can fail: the runtime would drop such a client (server.py logs "cannot encode"), so
    the fuzzer reports it, with the API and the version the client asked in."""
    real = KafkaCodec.encode_response

    def broken(self, header, message):
        if type(message).__name__ == "DescribeConfigsResponse":
            raise KeyError("planted")
        return real(self, header, message)

    monkeypatch.setattr(KafkaCodec, "encode_response", broken)
    report = runner.run(seed=12, max_inputs=1500, targets=("kafka",))
    assert any("cannot encode its answer DescribeConfigsResponse in Kafka's v" in line for line in report.lines()), (
        report.lines()
    )
    key = next(iter(report.findings.values())).key
    seen = runner.replay(key)
    assert seen.finding is not None and "Kafka-framed request on the" in seen.input[0], seen.input


def test_requests_name_what_the_hints_hold():
    """The real node's frames (KAFKA_HINTS) ask about its own topics and brokers, not only strangers."""
    codec = KafkaCodec(frozenset({32}), 1)  # a listener serving DescribeConfigs only
    rng, named = random.Random(1), Counter()
    for cid in range(1, 201):
        frame, what = kafka_request(codec, rng, KAFKA_HINTS, cid)
        assert what.startswith(("DescribeConfigsRequest v", "API key ")), what
        try:
            request = codec.decode_request(frame)
        except FrameError:
            continue
        named.update(r.resource_name for r in request.message.resources)
    assert named["t1"] and named["no-such-topic"], named
