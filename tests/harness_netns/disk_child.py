"""A process whose disk the disk-fault tests fault: `disk_child.py DATA_DIR OTHER_DIR`, then one JSON
line per stdin command `OP WHERE` with OP in write, fsync, fdatasync, pwrite and WHERE in data, other:
  -> {"ms": how long the call took, "errno": its errno name or null}
"""

import errno
import json
import os
import sys
import time


def main() -> None:
    dirs = {"data": sys.argv[1], "other": sys.argv[2]}
    fds = {where: os.open(os.path.join(d, "file"), os.O_WRONLY | os.O_CREAT, 0o644) for where, d in dirs.items()}
    calls = {
        "write": lambda fd: os.write(fd, b"x" * 4096),
        "pwrite": lambda fd: os.pwrite(fd, b"y" * 4096, 0),
        "fsync": os.fsync,
        "fdatasync": os.fdatasync,
    }
    for line in sys.stdin:
        op, where = line.split()
        start = time.monotonic()
        try:
            calls[op](fds[where])
            code = None
        except OSError as exc:
            code = errno.errorcode.get(exc.errno, str(exc.errno))
        print(json.dumps({"ms": (time.monotonic() - start) * 1000, "errno": code}), flush=True)


if __name__ == "__main__":
    main()
