"""`udp_probe.py HOST PORT COUNT INTERVAL_MS WAIT_S`: send COUNT numbered datagrams, one every
INTERVAL_MS, to a UDP echo server; print JSON {"sent", "received", "rtt_ms": [...]} once the last
answer arrived or WAIT_S after the last send. Each answer counts once (by sequence number)."""

import json
import select
import socket
import struct
import sys
import time


def main() -> None:
    host, port, count, interval, wait = (
        sys.argv[1],
        int(sys.argv[2]),
        int(sys.argv[3]),
        float(sys.argv[4]),
        float(sys.argv[5]),
    )
    sent: dict[int, float] = {}
    rtts: dict[int, float] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((host, port))
        next_send = time.monotonic()
        seq = 0
        deadline = None
        while len(rtts) < count:
            now = time.monotonic()
            if seq < count and now >= next_send:
                sent[seq] = now
                sock.send(struct.pack("!I", seq) + b"kchaos-probe")
                seq += 1
                next_send += interval / 1000
                if seq == count:
                    deadline = now + wait
            if deadline is not None and now > deadline:
                break
            until = next_send if seq < count else deadline
            ready, _, _ = select.select([sock], [], [], max(0.0, until - time.monotonic()))
            if ready:
                try:
                    data = sock.recv(2048)
                except ConnectionRefusedError:
                    continue
                got = struct.unpack_from("!I", data)[0]
                if got in sent and got not in rtts:
                    rtts[got] = (time.monotonic() - sent[got]) * 1000
    print(json.dumps({"sent": len(sent), "received": len(rtts), "rtt_ms": sorted(rtts.values())}))


if __name__ == "__main__":
    main()
