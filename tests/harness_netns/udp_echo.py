"""A UDP echo server for packet-fault tests: `udp_echo.py HOST PORT MARKER` (MARKER tags the process)."""

import socket
import sys


def main() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((sys.argv[1], int(sys.argv[2])))
        while True:
            data, peer = sock.recvfrom(2048)
            sock.sendto(data, peer)


if __name__ == "__main__":
    main()
