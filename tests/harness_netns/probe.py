"""`probe.py HOST PORT TIMEOUT`: exit 0 if an echo round trip to HOST:PORT works within TIMEOUT, else 1."""

import socket
import sys

try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])) as s:
        s.sendall(b"ping\n")
        sys.exit(0 if s.recv(16) == b"ping\n" else 1)
except OSError:
    sys.exit(1)
