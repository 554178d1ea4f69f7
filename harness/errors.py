"""The one exception type every command turns into a one-line message and exit code 254."""

from __future__ import annotations

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_ERROR = 254


class UserError(Exception):
    """Bad input from the user (a file, a flag, a config key). The message names what and where."""
