"""What `kchaos admin` and `kchaos quorum` make of their flags before any call: the SASL login, Kafka's
`k=v,k2=[a,b]` config syntax and the timeouts (light: no client is loaded to parse flags)."""

from __future__ import annotations

import argparse
import os

from vocab.errors import UserError

PASSWORD_ENV = "KCHAOS_ADMIN_PASSWORD"
DEFAULT_TIMEOUT_MS = 30_000
MAX_CONNECT_TIMEOUT_MS = 5_000


def login_from(args: argparse.Namespace) -> tuple[str, str] | None:
    """The SASL/PLAIN (user, password) of `--user` / `--password` (or $KCHAOS_ADMIN_PASSWORD); None
    without `--user`."""
    password = args.password if args.password is not None else os.environ.get(PASSWORD_ENV)
    if args.user is None and args.password is not None:
        raise UserError("--password needs --user")
    if args.user is not None and password is None:
        raise UserError(f"--user {args.user} needs --password (or ${PASSWORD_ENV})")
    return (args.user, password) if args.user is not None and password is not None else None


def split_top_level(text: str, what: str) -> list[str]:
    """Split at commas outside [...] (Kafka's syntax for list values: k=[a,b])."""
    items, depth, current = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise UserError(f"{what}: unbalanced ']' in '{text}'")
        if ch == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth:
        raise UserError(f"{what}: unclosed '[' in '{text}'")
    items.append("".join(current))
    return [item.strip() for item in items if item.strip()]


def parse_config_pairs(text: str, what: str) -> list[tuple[str, str]]:
    """`k=v,k2=[a,b]` -> [("k", "v"), ("k2", "a,b")]."""
    pairs = []
    for item in split_top_level(text, what):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UserError(f"{what}: '{item}' is not NAME=VALUE")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        pairs.append((name.strip(), value))
    return pairs
