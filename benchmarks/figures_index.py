"""Which benchmark prints what, and where in the docs its figures are: the index table of docs/figures.md.

    python benchmarks/figures_index.py               # print the table
    python benchmarks/figures_index.py --write-docs  # also rewrite it in docs/figures.md

Nothing is typed: each row is a script of `benchmarks/`, what it prints is its docstring's first
sentence, and where the figures are is every docs section (a heading and the text under it) that
names the script, linked by MkDocs' own anchor of the heading.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

from markdown.extensions.toc import slugify

from harness import docs_tables

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SKIP_PAGES = {"reference/cli.md"}  # generated from the parsers: it names no benchmark's figures
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def what_it_prints(script: Path) -> str:
    """The first sentence of the script's docstring, without the '(printed figures, not a test)' aside."""
    doc = ast.get_docstring(ast.parse(script.read_text())) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    first = re.sub(r"\s*\((printed )?figures[^)]*\)|[:;,]\s*prints figures[^.]*", "", first)
    sentence = re.split(r"(?<=\.)\s+(?=[A-Za-z(`])", first)[0].rstrip(".")
    return sentence.replace("|", "/")


def sections(page: Path) -> list[tuple[str, str]]:
    """(heading, text under it) of a Markdown page, code blocks included in the text, not as headings."""
    out: list[tuple[str, str]] = []
    heading, text, fenced = "", [], False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        m = None if fenced else HEADING.match(line)
        if m is None:
            text.append(line)
            continue
        out.append((heading, "\n".join(text)))
        heading, text = m.group(2), []
    out.append((heading, "\n".join(text)))
    return [(h, t) for h, t in out if h]


def anchor(heading: str) -> str:
    return slugify(heading.replace("`", ""), "-")


def where(script: str, index_page: Path) -> str:
    """Links to every docs section that names `script` (the index's own section left out)."""
    links = []
    for page in sorted(DOCS.rglob("*.md")):
        rel = page.relative_to(DOCS).as_posix()
        if rel in SKIP_PAGES:
            continue
        for heading, text in sections(page):
            if script not in heading and script not in text:
                continue
            if page == index_page and (heading.startswith("Which benchmark") or heading == "Figures"):
                continue  # the index itself and the page's introduction
            target = f"#{anchor(heading)}" if page == index_page else f"{rel}#{anchor(heading)}"
            links.append(f"[{heading.replace('|', '/')}]({target})")
    return "; ".join(dict.fromkeys(links)) or "named in no docs section"


def index_table(index_page: Path = docs_tables.FIGURES) -> str:
    rows = []
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        if script.name.startswith("_") or script.name == Path(__file__).name:
            continue
        rel = f"benchmarks/{script.name}"
        rows.append([f"`{rel}`", what_it_prints(script), where(script.name, index_page)])
    return docs_tables.table(["script", "what it prints", "where the figures are"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    docs_tables.add_option(parser, "the index table")
    args = parser.parse_args()
    body = index_table()
    print(body, end="")
    if args.write_docs:
        docs_tables.write_table("index", body)


if __name__ == "__main__":
    main()
