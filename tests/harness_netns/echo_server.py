"""A tiny TCP echo server for netns tests: `echo_server.py HOST PORT MARKER` (MARKER tags the process)."""

import socket
import sys
import threading


def serve(conn: socket.socket) -> None:
    with conn:
        while data := conn.recv(4096):
            conn.sendall(data)


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    with socket.create_server((host, port)) as srv:
        while True:
            conn, _ = srv.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
