"""lazyfs: a FUSE filesystem that forgets what was not fsynced when told the power went out.

A passthrough to a backing directory with a page-cache model (the rules are in `store`): writes and
truncations are visible at once but durable only after an fsync/fdatasync of that file; creations,
renames and removals are durable only after an fsync of their directory. A "power loss" command puts
every file and directory back to its durable state; a process crash (kill -9) loses nothing.

Parts: `store` (the model, no FUSE), `fs` (fusepy operations; needs libfuse2), `daemon` (the
`python -m harness.backends.lazyfs` entry point), `control` (the JSON-lines control socket and its
client), `mount` (start/stop a ledgered daemon + mount from the harness), `nodes` (one per netns node).
"""

from harness.backends.lazyfs.control import LazyfsClient, LazyfsError
from harness.backends.lazyfs.layout import StateDir
from harness.backends.lazyfs.mount import LazyMount, start_lazyfs, stop_lazyfs

__all__ = ["LazyMount", "LazyfsClient", "LazyfsError", "StateDir", "start_lazyfs", "stop_lazyfs"]
