"""The one exception type every command turns into a one-line message and exit code 254."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_ERROR = 254


class UserError(Exception):
    """Bad input from the user (a file, a flag, a config key). The message names what and where."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad flag or argument is one line on stderr naming the command, and exit 254
    (argparse's own 2 is Jepsen's *unknown* here). Subcommand parsers inherit the class."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_ERROR)

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[no-untyped-def, override]
        # Unknown flags are reported by the innermost parser that saw them, so the line names the
        # subcommand (`kchaos run: error: ...`) rather than the top level.
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras
