"""`kchaos node start --config server.properties`: run one quorum node in the foreground.

Logs go to stderr. SIGTERM/SIGINT stop the node cleanly (a leader resigns with EndQuorumEpoch first)
and exit 0. A config error, a data dir that cannot be trusted (corrupt quorum-state, another cluster's
data) or a fatal error from the core ends with a one-line message and a non-zero exit.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from node.raft.config import ConfigError
from node.raft.storage import StorageError
from node.runtime import event_loop
from node.runtime.server import NodeServer
from node.runtime.server_config import ServerConfig, load_server_config
from vocab.errors import EXIT_ERROR, UserError

LOG_FORMAT = "%(asctime)s %(levelname)s %(message)s"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("node", description="run a node of the reference KRaft metadata quorum")
    sub = parser.add_subparsers(dest="node_command", metavar="ACTION", required=True)
    start = sub.add_parser("start", help="start a node in the foreground (logs to stderr)")
    start.add_argument("--config", required=True, help="a server.properties file (Kafka key names)")
    start.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    start.set_defaults(func=start_command)


def load_config_or_fail(path: str) -> ServerConfig:
    try:
        config = load_server_config(path)
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    for warning in config.warnings:
        print(f"kchaos: warning: {warning}", file=sys.stderr)
    return config


async def run_node(config: ServerConfig) -> tuple[int, str | None]:
    """The exit code, and the fatal error that stopped the node if one did."""
    server = NodeServer(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: loop.create_task(server.stop()))
    try:
        await server.start()
    except StorageError as exc:
        raise UserError(f"node {config.node_id}: {exc}") from None
    except OSError as exc:
        await server.stop(grace_s=0)
        raise UserError(f"node {config.node_id}: cannot listen or open files: {exc}") from None
    code = await server.serve_forever()
    return code, server.fatal


def start_command(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level, format=LOG_FORMAT, stream=sys.stderr)
    config = load_config_or_fail(args.config)
    try:
        factory = event_loop.loop_factory()
    except ValueError as exc:
        raise UserError(str(exc)) from None
    with asyncio.Runner(loop_factory=factory) as runner:
        code, fatal = runner.run(run_node(config))
    # Printed once the loop is closed, so the one-line message is stderr's last line whatever the
    # loop's shutdown logs (a handler still writing to a connection the stop closed, say).
    if fatal:
        print(f"kchaos: error: node {config.node_id}: {fatal}", file=sys.stderr)
        return EXIT_ERROR
    return code
