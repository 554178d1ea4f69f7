"""The lazyfs daemon: mounts a store at a mount point and serves the control socket until unmounted.

    python -m harness.backends.lazyfs STATE_DIR MOUNTPOINT [--no-backing-sync]

STATE_DIR holds `disk/` (the backing tree), `limbo/` (inodes kept for a power loss to bring back) and
`control.sock`. The daemon exits 0 once the mount is gone (umount, or SIGTERM, which unmounts).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from harness.backends.lazyfs.layout import StateDir
from vocab.errors import EXIT_ERROR


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.backends.lazyfs", description=__doc__)
    parser.add_argument("state_dir", type=Path)
    parser.add_argument("mountpoint", type=Path)
    parser.add_argument(
        "--no-backing-sync",
        action="store_true",
        help="do not pass fsyncs on to the backing files (the model stays exact; the host's disk is not synced)",
    )
    args = parser.parse_args(argv)
    if not args.mountpoint.is_dir():
        print(f"lazyfs: mount point {args.mountpoint}: not an existing directory", file=sys.stderr)
        return EXIT_ERROR
    level = logging.DEBUG if os.environ.get("LAZYFS_DEBUG") else logging.INFO
    logging.basicConfig(stream=sys.stderr, level=level, format="%(asctime)s lazyfs %(levelname)s %(message)s")
    try:
        from harness.backends.lazyfs.fs import LazyOperations, mount
    except (ImportError, OSError) as exc:  # fusepy missing, or libfuse2 missing (fusepy raises EnvironmentError)
        print(f"lazyfs: cannot load FUSE: {exc} (apt-get install libfuse2; pip install fusepy)", file=sys.stderr)
        return EXIT_ERROR
    from harness.backends.lazyfs.control import ControlServer
    from harness.backends.lazyfs.store import LazyStore

    state = StateDir(args.state_dir)
    try:
        state.make()
    except OSError as exc:
        print(f"lazyfs: state dir {args.state_dir}: {exc.strerror}", file=sys.stderr)
        return EXIT_ERROR
    os.umask(0)  # the kernel already applied the caller's umask to every mode it sends
    store = LazyStore(state.disk, state.limbo, sync_backing=not args.no_backing_sync)
    ops: LazyOperations | None = None

    def power_loss(request: dict[str, Any]) -> dict[str, Any]:
        assert ops is not None
        seed = request.get("torn_seed")
        result = ops.quiet(lambda: store.power_loss(None if seed is None else int(seed)))
        logging.info("power loss: %s", result)
        return result

    def sync(_: dict[str, Any]) -> dict[str, Any]:
        assert ops is not None
        return ops.quiet(store.sync_all)

    server = ControlServer(
        state.control,
        {
            "ping": lambda _: {"pid": os.getpid()},
            "status": lambda _: store.status(),
            "power_loss": power_loss,
            "sync": sync,
        },
    )
    ops = LazyOperations(store, on_init=server.start)
    logging.info("serving %s on %s (backing sync %s)", state.disk, args.mountpoint, not args.no_backing_sync)
    try:
        mount(ops, str(args.mountpoint))
    except RuntimeError as exc:  # fusepy: fuse_main failed (libfuse printed why on stderr)
        print(f"lazyfs: cannot mount {args.mountpoint} (fuse_main returned {exc})", file=sys.stderr)
        return EXIT_ERROR
    finally:
        server.close()
        store.close_all()
    logging.info("unmounted %s", args.mountpoint)
    return 0
