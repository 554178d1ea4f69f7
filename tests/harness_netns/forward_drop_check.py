"""Run inside a namespace whose FORWARD policy is DROP (as docker leaves it): `forward_drop_check.py RUN_DIR`.

Prints one JSON line: whether nodes reached each other with the backend's ACCEPT rule, whether they
still did once that rule was deleted by hand (they must not: the rule is what lets them), and the
FORWARD chain after teardown.
"""

import json
import shlex
import subprocess
import sys
from pathlib import Path

from harness.backends.netns import NetnsBackend

HERE = Path(__file__).parent


def reaches(backend: NetnsBackend, src: str, dst: str) -> bool:
    probe = [sys.executable, str(HERE / "probe.py"), backend.address(dst), "7000", "2"]
    return backend.exec(src, probe).returncode == 0


def forward_rules() -> list[str]:
    return subprocess.run(["iptables", "-w", "-S", "FORWARD"], capture_output=True, text=True).stdout.splitlines()


def main() -> None:
    result = {}
    with NetnsBackend(Path(sys.argv[1]), ["n1", "n2"], firewall="nft") as backend:
        backend.start("n2", [sys.executable, str(HERE / "echo_server.py"), backend.address("n2"), "7000", "fwd"])
        for _ in range(200):
            if backend.exec("n2", ["ss", "-ltn"]).stdout.count(":7000"):
                break
        result["rules_during"] = forward_rules()
        result["with_rule"] = reaches(backend, "n1", "n2")
        rule = next(r for r in forward_rules() if "kchaos" in r)
        subprocess.run(["iptables", "-w", "-D", *shlex.split(rule)[1:]], check=True)
        result["without_rule"] = reaches(backend, "n1", "n2")
    result["rules_after"] = forward_rules()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
