"""docs/figures.md's tables are written by the programs that measure them, never typed: every table
sits between `figures:NAME` markers whose owner's source writes NAME (harness/docs_tables.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness import docs_tables
from harness.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "docs" / "figures.md"


def owner_source(owner: str) -> Path:
    """The file whose code writes a block: `python benchmarks/X.py ...` or `kchaos CMD ...`."""
    words = owner.split()
    if words[:2] == ["python", words[1]] and words[1].startswith("benchmarks/"):
        return ROOT / words[1]
    if words[0] == "kchaos" and words[1] in COMMANDS:
        return ROOT / (COMMANDS[words[1]].module.replace(".", "/") + ".py")
    raise AssertionError(f"owner {owner!r} is neither `python benchmarks/X.py` nor a kchaos command")


def table_lines(text: str) -> list[int]:
    """Line numbers (0-based) of Markdown table rows outside code blocks."""
    rows, fenced = [], False
    for i, line in enumerate(text.splitlines()):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and line.lstrip().startswith("|"):
            rows.append(i)
    return rows


def test_every_table_of_figures_md_is_between_markers_of_an_owner_that_writes_it():
    text = FIGURES.read_text()
    blocks = docs_tables.blocks(text)
    assert {"index", "speed-simulator", "speed-cli", "cli-startup", "bug-matrix"} <= {b.name for b in blocks}
    inside = {i for b in blocks for i in range(b.first, b.end)}
    loose = [i + 1 for i in table_lines(text) if i not in inside]
    assert not loose, f"docs/figures.md: table rows outside figures markers (typed by hand?) at lines {loose}"
    for b in blocks:
        assert "--write-docs" in b.owner.split(), f"figures:{b.name}: its owner {b.owner!r} does not write docs"
        source = owner_source(b.owner).read_text()
        assert f'"{b.name}"' in source, f"figures:{b.name}: {b.owner} does not write a table of that name"
        assert any(i in range(b.first, b.end) for i in table_lines(text)), f"figures:{b.name} holds no table"


def test_every_block_was_written_by_its_owner():
    lines = FIGURES.read_text().splitlines()
    for b in docs_tables.blocks("\n".join(lines)):
        assert lines[b.first].startswith(f"_Written by `{b.owner}` on "), f"figures:{b.name}: run `{b.owner}`"


def test_the_index_lists_every_benchmark_as_the_docs_name_it_now():
    from benchmarks.figures_index import index_table

    lines = FIGURES.read_text().splitlines()
    block = next(b for b in docs_tables.blocks("\n".join(lines)) if b.name == "index")
    written = "\n".join(line for line in lines[block.first : block.end] if line.startswith("|")) + "\n"
    assert written == index_table(), (
        "docs/figures.md's index is out of date: python benchmarks/figures_index.py --write-docs"
    )


PAGE = """# Page

Before.

<!-- figures:speed begin: python benchmarks/bench_x.py --write-docs -->
| old | table |
|---|---|
<!-- figures:speed end -->

After.
"""


def test_write_table_replaces_only_its_block_and_says_who_when_and_where(tmp_path):
    page = tmp_path / "figures.md"
    page.write_text(PAGE)
    docs_tables.write_table("speed", docs_tables.table(["a", "b"], [["1", "2"]]), page)
    text = page.read_text()
    assert text.startswith(
        "# Page\n\nBefore.\n\n<!-- figures:speed begin: python benchmarks/bench_x.py --write-docs -->\n"
    )
    assert text.endswith("| a | b |\n|---|---|\n| 1 | 2 |\n<!-- figures:speed end -->\n\nAfter.\n")
    assert "old" not in text
    provenance = text.splitlines()[5]
    assert re.fullmatch(
        r"_Written by `python benchmarks/bench_x.py --write-docs` on \d{4}-\d\d-\d\d \d\d:\d\d UTC at commit "
        r"\w+( with uncommitted changes)?; \d+ cores \(.+\), load average [\d.]+\._",
        provenance,
    ), provenance
    docs_tables.write_table("speed", docs_tables.table(["a"], [["3"]]), page)  # again: replaced, not stacked
    assert page.read_text().count("_Written by") == 1 and "| 3 |" in page.read_text()


@pytest.mark.parametrize(
    ("status", "uncommitted"),
    [
        ("", False),
        (" M docs/figures.md", False),  # an earlier benchmark of the same batch rewrote another table
        ("M  docs/figures.md\n M harness/gate.py", True),
        (" M node/raft/fetch.py", True),
    ],
)
def test_provenance_says_uncommitted_only_for_changes_beside_the_page(monkeypatch, status, uncommitted):
    answers = {"rev-parse": "abc1234", "status": status}
    monkeypatch.setattr(docs_tables, "_git", lambda *argv: answers[argv[0]].strip())
    line = docs_tables.provenance("python benchmarks/bench_x.py --write-docs")
    assert ("at commit abc1234 with uncommitted changes;" in line) is uncommitted, line
    assert "at commit abc1234" in line


@pytest.mark.parametrize(
    ("page", "message"),
    [
        (
            PAGE.replace("figures:speed begin", "figures:other begin").replace(
                "figures:speed end", "figures:other end"
            ),
            "no '<!-- figures:speed begin",
        ),
        (PAGE.replace("<!-- figures:speed end -->\n", ""), "figures:speed begins but never ends"),
        (PAGE.replace(": python benchmarks/bench_x.py --write-docs", ""), "line 5: figures:speed begin names no owner"),
    ],
)
def test_a_page_without_a_good_block_is_a_one_line_error_and_is_left_alone(tmp_path, page, message):
    path = tmp_path / "figures.md"
    path.write_text(page)
    with pytest.raises(SystemExit, match=re.escape(message)):
        docs_tables.write_table("speed", "| a |\n|---|\n", path)
    assert path.read_text() == page


def test_kchaos_bugs_write_docs_puts_its_table_in_the_bug_matrix_block(tmp_path, monkeypatch, capsys):
    from harness.cli import main

    page = tmp_path / "figures.md"
    page.write_text(
        PAGE.replace("figures:speed", "figures:bug-matrix").replace(
            "python benchmarks/bench_x.py --write-docs", "kchaos bugs --write-docs"
        )
    )
    monkeypatch.setattr(docs_tables, "FIGURES", page)
    argv = ["bugs", "--bug", "none", "--sweep", "1", "--workload", "config-register", "--nemesis", "kill"]
    argv += ["--time-limit", "4s", "--recovery", "2s", "--results", str(tmp_path / "results"), "--quiet"]
    assert main([*argv, "--write-docs"]) == 0
    printed = capsys.readouterr().out
    written = page.read_text().splitlines()
    assert written[5].startswith("_Written by `kchaos bugs --write-docs` on ")  # the marker names the owner
    assert "\n".join(written[7:-3]) + "\n" == printed  # the table kchaos bugs printed, nothing else
    assert printed.startswith("| bug | component |") and "Correct cluster: 1 seeds, 0 false alarms" in printed
