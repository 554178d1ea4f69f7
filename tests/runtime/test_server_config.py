"""server.properties parsing: Kafka's key names, one-line errors naming the key, warnings for unknown keys."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from node.raft.config import ConfigError
from node.runtime.properties import parse_properties
from node.runtime.server_config import build_server_config, load_server_config

REPO = Path(__file__).resolve().parents[2]

VOTER = """\
# a KRaft controller, as a Kafka operator writes it
node.id=1
process.roles=controller
listeners=CONTROLLER://127.0.0.2:9093
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.2:9093,2@127.0.0.3:9093,3@127.0.0.4:9093
metadata.log.dir=/tmp/kraft-1
controller.quorum.election.timeout.ms=1500
quorum.fetch.timeout.ms=3000
metrics.listener=127.0.0.2:9400
"""


def build(text: str):
    return build_server_config(parse_properties(text, "server.properties"), "server.properties")


def without(text: str, key: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if not line.startswith(key + "="))


def replaced(text: str, key: str, value: str) -> str:
    return without(text, key) + f"{key}={value}\n"


def test_a_kafka_controller_file_reads_as_expected():
    config = build(VOTER)
    assert config.node_id == 1 and config.is_voter
    assert config.roles == {"controller"}
    assert (config.listener.host, config.listener.port) == ("127.0.0.2", 9093)
    assert [v.node_id for v in config.voters] == [1, 2, 3]
    assert config.data_dir == Path("/tmp/kraft-1")
    assert config.raft.election_timeout_ms == 1500  # Kafka's controller.quorum.* spelling
    assert config.raft.fetch_timeout_ms == 3000  # KIP-595's quorum.* spelling
    assert config.metrics_address == ("127.0.0.2", 9400)
    assert config.cluster_id is None and config.warnings == ()


def test_kip_names_and_fallbacks_are_accepted():
    text = without(without(VOTER, "controller.quorum.voters"), "metadata.log.dir")
    text += "quorum.voters=1@127.0.0.2:9093,2@127.0.0.3:9093\nlog.dirs=/data/a,/data/b\ncluster.id=abc\n"
    config = build(text)
    assert [v.node_id for v in config.voters] == [1, 2]
    assert config.data_dir == Path("/data/a")
    assert config.cluster_id == "abc"


def test_a_broker_is_an_observer():
    text = replaced(VOTER, "node.id", "4").replace("process.roles=controller", "process.roles=broker")
    text = replaced(text, "listeners", "BROKER://127.0.0.5:9092,CONTROLLER://127.0.0.5:9093")
    config = build(text)
    assert not config.is_voter
    assert config.listener.name == "BROKER"


def test_properties_syntax_of_java():
    entries = parse_properties("a = 1\nb:2\nc 3\n! comment\nd=x\\\n   y\ne=tab\\tand\\u0041\n", "f")
    assert {e.key: e.value for e in entries} == {"a": "1", "b": "2", "c": "3", "d": "xy", "e": "tab\tandA"}
    assert [e.line for e in entries] == [1, 2, 3, 5, 7]


def test_unknown_and_repeated_keys_are_warned_about_by_name_and_line():
    config = build(VOTER + "num.io.threads=8\nnode.id=1\n")
    assert any("server.properties:11: unknown key 'num.io.threads'" in w for w in config.warnings)
    assert any("key 'node.id' repeats line 2" in w for w in config.warnings)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: without(t, "node.id"), "missing required key 'node.id'"),
        (lambda t: replaced(t, "node.id", "one"), "node.id: 'one' is not an integer"),
        (lambda t: without(t, "process.roles"), "missing required key 'process.roles'"),
        (lambda t: replaced(t, "process.roles", "leader"), "process.roles: 'leader' must be"),
        (lambda t: without(t, "controller.quorum.voters"), "'controller.quorum.voters' or 'quorum.voters'"),
        (lambda t: replaced(t, "controller.quorum.voters", "1@x"), "controller.quorum.voters: '1@x' is not"),
        (lambda t: replaced(t, "controller.quorum.voters", "2@127.0.0.3:9093"), "node.id 1 is a controller but"),
        (lambda t: replaced(t, "listeners", "CONTROLLER://127.0.0.2:9999"), "listeners: CONTROLLER port 9999"),
        (lambda t: replaced(t, "listeners", "PLAIN://127.0.0.2:9093"), "no listener named CONTROLLER"),
        (lambda t: replaced(t, "listeners", "127.0.0.2:9093"), "is not NAME://host:port"),
        (lambda t: without(t, "controller.listener.names"), "'controller.listener.names'"),
        (lambda t: without(t, "metadata.log.dir"), "'metadata.log.dir' or 'log.dirs'"),
        (lambda t: replaced(t, "quorum.fetch.timeout.ms", "-5"), "quorum.fetch.timeout.ms: -5 must be >= 1"),
        (lambda t: replaced(t, "quorum.retry.backoff.ms", "soon"), "quorum.retry.backoff.ms: 'soon' is not"),
        (lambda t: t + "quorum.election.timeout.ms=900\n", "conflicts with another spelling"),
        (lambda t: replaced(t, "metrics.listener", "nowhere"), "metrics.listener: 'nowhere' is not host:port"),
        (lambda t: replaced(t, "broker.session.timeout.ms", "0"), "broker.session.timeout.ms: 0 must be >= 1"),
        (lambda t: replaced(t, "kchaos.test.append.enable", "yes"), "'yes' is not true or false"),
    ],
)
def test_bad_or_missing_values_name_the_key(change, message):
    with pytest.raises(ConfigError) as info:
        build(change(VOTER))
    text = str(info.value)
    assert message in text
    assert "\n" not in text
    assert text.startswith("server.properties")


def test_a_bad_value_names_its_line():
    with pytest.raises(ConfigError, match=r"^server\.properties:2: node\.id: 'x' is not an integer$"):
        build("# first line\nnode.id=x\n" + without(VOTER, "node.id"))


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_server_config(tmp_path / "nope.properties")


def test_node_start_prints_one_line_and_exits_254_on_a_bad_key(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(replaced(VOTER, "quorum.fetch.timeout.ms", "fast") + "num.io.threads=8\n")
    result = subprocess.run(
        [sys.executable, "-m", "node.runtime", "node", "start", "--config", str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert result.returncode == 254
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert errors == [f"kchaos: error: {path}:10: quorum.fetch.timeout.ms: 'fast' is not an integer"]
    assert "Traceback" not in result.stderr


def test_pre_vote_is_on_unless_the_test_cluster_turns_it_off():
    assert build(VOTER).raft.pre_vote is True
    assert build(replaced(VOTER, "kchaos.raft.pre.vote.enable", "false")).raft.pre_vote is False
    assert build(replaced(VOTER, "kchaos.raft.pre.vote.enable", "true")).raft.pre_vote is True
    with pytest.raises(ConfigError, match=r"kchaos\.raft\.pre\.vote\.enable.*'maybe' is not true or false"):
        build(replaced(VOTER, "kchaos.raft.pre.vote.enable", "maybe"))
