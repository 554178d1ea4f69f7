"""A process whose wall clock the clock-fault tests move: answers one JSON line per stdin command.

  now          -> {"wall": time.time()}
  sleep S      -> {"sleep": seconds time.sleep(S) took, "asyncio": seconds asyncio.sleep(S) took}
(both measured on the monotonic clock, which libfaketime leaves alone here)
"""

import asyncio
import json
import sys
import time


def main() -> None:
    for line in sys.stdin:
        cmd, *args = line.split()
        if cmd == "now":
            answer = {"wall": time.time()}
        elif cmd == "sleep":
            seconds = float(args[0])
            start = time.monotonic()
            time.sleep(seconds)
            slept = time.monotonic() - start
            start = time.monotonic()
            asyncio.run(asyncio.sleep(seconds))
            answer = {"sleep": slept, "asyncio": time.monotonic() - start}
        else:
            answer = {"error": f"unknown command {cmd!r}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
