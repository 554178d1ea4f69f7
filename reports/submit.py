"""Entry point for `spark-submit` (cluster runs): the same arguments as `kchaos report`.

    spark-submit --master spark://head:7077 \\
        "$(python -c 'import reports.submit as s; print(s.__file__)')" /shared/results --out /shared/report

The master, deploy mode and resources come from spark-submit; `make_session` does not override them,
and it ships the `reports` package to the executors itself (they need pandas and pyarrow installed).
"""

from __future__ import annotations

import argparse
import sys

from reports.cli import add_arguments, run
from vocab.errors import EXIT_ERROR, UserError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="reports.submit", description="kchaos report under spark-submit")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except UserError as exc:
        print(f"kchaos report: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
