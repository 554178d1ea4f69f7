"""The delay daemon: holds each packet NFQUEUE gives it for delay ± jitter ms, then lets it through.

`python -m harness.backends.delayd --queue N --delay-ms D --jitter-ms J [--seed S]`, run inside a
node's network namespace (NFQUEUE is per namespace). It prints "ready" once bound to the queue, so
the caller can add the rules that feed it (with `--queue-bypass`: packets pass undelayed while no
daemon is bound, never dropped). Each packet's delay is uniform in [D - J, D + J], so packets may be
reordered, as on a real network. SIGTERM (or SIGINT) lets every held packet through at once and
exits 0; a SIGKILLed daemon's held packets are dropped by the kernel (TCP sends them again).
"""

from __future__ import annotations

import argparse
import heapq
import random
import select
import signal
import socket
import sys
import time

from harness.backends.nfqueue import NfQueue, NfQueueError


def serve(queue: NfQueue, delay_s: float, jitter_s: float, rng: random.Random, wakeup: socket.socket) -> int:
    """Hold and release packets until `wakeup` becomes readable; returns how many went through."""
    held: list[tuple[float, int]] = []  # (release time, packet id), earliest first
    released = 0
    while True:
        timeout = max(0.0, held[0][0] - time.monotonic()) if held else None
        ready, _, _ = select.select([queue, wakeup], [], [], timeout)
        if wakeup in ready:
            break
        if queue in ready:
            now = time.monotonic()
            for packet_id in queue.packet_ids():
                heapq.heappush(held, (now + rng.uniform(delay_s - jitter_s, delay_s + jitter_s), packet_id))
        now = time.monotonic()
        while held and held[0][0] <= now:
            queue.verdict(heapq.heappop(held)[1])
            released += 1
    for _, packet_id in held:
        queue.verdict(packet_id)
    return released + len(held)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.backends.delayd", description=__doc__.split("\n")[0])
    parser.add_argument("--queue", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    if args.delay_ms < 0 or not 0 <= args.jitter_ms <= args.delay_ms:
        parser.error(f"need 0 <= jitter <= delay, got {args.delay_ms} ± {args.jitter_ms}")
    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    signal.set_wakeup_fd(wake_w.fileno())
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)  # the wakeup fd ends the loop
    try:
        queue = NfQueue(args.queue)
    except (NfQueueError, OSError) as exc:
        print(f"delayd: cannot bind NFQUEUE {args.queue}: {exc}", file=sys.stderr)
        return 254
    try:
        print("ready", flush=True)
        serve(queue, args.delay_ms / 1000, args.jitter_ms / 1000, random.Random(args.seed), wake_r)
    finally:
        queue.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
