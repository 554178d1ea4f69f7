"""`kchaos image build`: build (or find) the Docker image of the node for `--backend docker`.

The image is tagged by a hash of what goes into it (see harness/backends/docker_image.py), so this is a
no-op when this working tree's image is already in the engine; a docker run builds it on first use too.
Without a running engine, one is started for the build and stopped after it, as a run does.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from vocab.errors import UserError


def build_command(args: argparse.Namespace) -> int:
    from harness.backends.docker_engine import ensure_engine
    from harness.backends.docker_image import cache_dir, ensure_image, node_tag
    from harness.backends.ledger import LEDGER_NAME, Ledger, heal
    from harness.backends.shell import BackendError

    if args.print_tag:
        print(node_tag())
        return 0
    if os.geteuid() != 0:
        raise UserError("kchaos image build needs root (debootstrap, and maybe starting dockerd)")
    with tempfile.TemporaryDirectory(prefix="kchaos-image-ledger-") as tmp:
        ledger = Ledger.create(Path(tmp) / LEDGER_NAME)
        try:
            client = ensure_engine(ledger, cache_dir())
            tag = ensure_image(client, lambda text: print(f"kchaos image: {text}", file=sys.stderr, flush=True))
            client.close()
        except BackendError as exc:
            raise UserError(str(exc)) from None
        finally:
            heal(Path(tmp) / LEDGER_NAME)  # stops the engine if this command started it
    print(tag)
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("image", description=__doc__.splitlines()[0])
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    build = verbs.add_parser("build", description="build the node image for --backend docker; prints its tag")
    build.add_argument("--print-tag", action="store_true", help="only print the tag this tree's image has")
    build.set_defaults(func=build_command)
