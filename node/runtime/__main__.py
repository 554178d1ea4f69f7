"""`python -m node.runtime node start --config …`: the node and quorum commands without the rest of kchaos.

Spawning many nodes is faster this way (it imports only the runtime); `kchaos node …` is the same code.
"""

import argparse
import sys

from node.runtime import cli, quorum_cli
from vocab.errors import EXIT_ERROR, UserError

parser = argparse.ArgumentParser(prog="python -m node.runtime")
subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
cli.register(subparsers)
quorum_cli.register(subparsers)
args = parser.parse_args()
try:
    sys.exit(args.func(args))
except UserError as exc:
    print(f"kchaos: error: {exc}", file=sys.stderr)
    sys.exit(EXIT_ERROR)
