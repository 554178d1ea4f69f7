"""The documentation site (`mkdocs.yml`, `docs/`) and the README that points into it.

The site is built strictly, as CI would publish it: a broken link or anchor, or a page left out of the
nav, fails the build (mkdocs.yml's `validation`), and so this test. The build needs no network.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    # no -q: strict mode counts the warnings it logs, and -q would silence them
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's end-of-life banner, not a docs problem
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").exists()


@pytest.mark.parametrize(
    ("page", "text", "complaint"),
    [
        ("tutorial.md", "\nSee [the nemeses](concepts/nemesis.md).\n", "concepts/nemesis.md"),
        ("tutorial.md", "\nSee [kill](concepts/nemeses.md#no-such-heading).\n", "no-such-heading"),
        ("orphan.md", "# Not in the nav\n", "orphan.md"),
    ],
    ids=["broken-link", "broken-anchor", "page-missing-from-nav"],
)
def test_the_strict_build_fails_on(tmp_path: Path, page: str, text: str, complaint: str) -> None:
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    target = copy / "docs" / page
    target.write_text((target.read_text() if target.exists() else "") + text)
    done = build(copy, tmp_path / "site")
    assert done.returncode != 0
    assert complaint in done.stdout + done.stderr


def test_the_cli_reference_is_generated_from_the_parsers_and_current() -> None:
    spec = importlib.util.spec_from_file_location("gen_cli", ROOT / "docs" / "gen_cli.py")
    assert spec is not None and spec.loader is not None
    gen_cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_cli)
    text = gen_cli.render()
    from harness.cli import COMMANDS

    for name in COMMANDS:
        assert f"## `kchaos {name}`" in text, name
    assert "`--nemesis-option KIND.KEY=VALUE`" in text  # a flag of `kchaos run`, read from its parser
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    assert page == text, "docs/reference/cli.md is out of date: run python docs/gen_cli.py"


def test_the_readme_starts_with_the_two_setup_commands_and_stays_short() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert lines[:6] == [
        "# kraft-chaos",
        "",
        "```sh",
        "bash setup.sh run    # installs what it needs (apt-get, pip), then runs the default chaos run end to end",
        "bash setup.sh test   # installs what it needs, then lints (ruff) and runs the whole test suite",
        "```",
    ]  # .ci/run and users' muscle memory depend on these
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move the detail into docs/"


def test_the_readme_links_into_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", readme)
    assert links, "the README links into the docs"
    for link in links:
        assert (ROOT / link).is_file(), link
