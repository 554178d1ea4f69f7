"""TCP and UDP echo in one process, for fault tests: `dual_echo.py HOST TCP_PORT UDP_PORT MARKER`
(MARKER tags the process)."""

import socket
import sys
import threading


def serve_tcp(conn: socket.socket) -> None:
    with conn:
        while data := conn.recv(4096):
            conn.sendall(data)


def tcp(host: str, port: int) -> None:
    with socket.create_server((host, port)) as srv:
        while True:
            conn, _ = srv.accept()
            threading.Thread(target=serve_tcp, args=(conn,), daemon=True).start()


def udp(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((host, port))
        while True:
            data, peer = sock.recvfrom(2048)
            sock.sendto(data, peer)


def main() -> None:
    host = sys.argv[1]
    threading.Thread(target=tcp, args=(host, int(sys.argv[2])), daemon=True).start()
    udp(host, int(sys.argv[3]))


if __name__ == "__main__":
    main()
