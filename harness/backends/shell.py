"""Run the system tools the netns backend drives (`ip`, `nft`, `iptables`) and turn failures into one line."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence


class BackendError(RuntimeError):
    """A host-level operation failed; the message names the command and what it printed."""


def run(argv: Sequence[str], *, check: bool = True, input_text: str | None = None, timeout: float = 30.0) -> str:
    """Run `argv`, return its stdout; with `check`, a non-zero exit raises BackendError naming the command."""
    try:
        proc = subprocess.run(
            list(argv), input=input_text, capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError as exc:
        raise BackendError(f"{argv[0]}: command not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise BackendError(f"{' '.join(argv)}: timed out after {timeout:g}s") from exc
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise BackendError(f"{' '.join(argv)}: exit {proc.returncode}: {detail[-1] if detail else 'no output'}")
    return proc.stdout


def succeeds(argv: Sequence[str], *, timeout: float = 30.0) -> bool:
    """True when `argv` runs and exits 0 (a missing command counts as failure)."""
    try:
        run(argv, timeout=timeout)
    except BackendError:
        return False
    return True
