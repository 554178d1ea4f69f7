"""The counterexample viewer: one self-contained HTML file; a real browser renders it if present."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from checkers.gen import register_history
from checkers.history import pair, read_events
from checkers.linearizable import check
from checkers.viewer import build_data, render_html, write_html
from tests.checkers.lin_helpers import history

CHROMIUM = Path("/usr/bin/chromium")


def bad_history():
    return history(
        (0, "nemesis", "invoke", "start-partition", [["n1"], ["n2", "n3"]]),
        (1, 0, "invoke", "write", 1, "x"),
        (2, "nemesis", "info", "start-partition", [["n1"], ["n2", "n3"]]),
        (3, 0, "ok", "write", 1, "x"),
        (4, 1, "invoke", "write", 2, "x"),
        (5, 1, "info", "write", 2, "x"),
        (6, 2, "invoke", "read", None, "x"),
        (7, 2, "ok", "read", 7, "x"),
        (8, 3, "invoke", "write", "</script><script>alert(1)</script>", "y"),
        (9, 3, "ok", "write", "</script><script>alert(1)</script>", "y"),
        (10, "nemesis", "invoke", "stop-partition", None),
        (11, "nemesis", "info", "stop-partition", None),
    )


def test_html_is_self_contained_and_shows_the_failure(tmp_path):
    h = bad_history()
    verdict = check(h, all_keys=True)
    assert verdict.valid is False
    path = write_html(tmp_path / "view.html", h, verdict)
    html = path.read_text()
    assert not re.search(r"(?:src|href)\s*=\s*[\"']?(?:https?:)?//", html)
    assert "http://" not in html and "https://" not in html
    assert "<script src" not in html and "<link" not in html
    assert "</script><script>alert" not in html  # data cannot close the script element
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S)[1])
    assert [lane["label"] for lane in data["lanes"]] == ["x"]  # only the failing key gets a lane
    [lane] = data["lanes"]
    assert lane["stuck"][0]["id"] == 6 and lane["stuck"][0]["needs"] == "state == 7"
    assert {op["id"] for op in lane["ops"]} == {1, 4, 6}
    info = next(op for op in lane["ops"] if op["id"] == 4)
    assert info["ret"] is None and info["type"] == "info"
    assert data["faults"] == [{"kind": "partition", "start": 2, "end": 11, "value": [["n1"], ["n2", "n3"]]}]


def test_a_valid_history_shows_its_keys():
    gen = register_history(60, keys=3, processes=3, seed=5)
    h = pair(read_events(gen.events))
    data = build_data(h, check(h, all_keys=True))
    assert data["valid"] is True and len(data["lanes"]) == 3
    assert sum(len(lane["ops"]) for lane in data["lanes"]) == len(h.ops)


def png_size_and_colours(path: Path) -> tuple[tuple[int, int], int]:
    import matplotlib.image as mpimg
    import numpy as np

    img = mpimg.imread(str(path))
    pixels = img.reshape(-1, img.shape[-1])[:, :3]
    return img.shape[:2], len(np.unique((pixels * 255).astype(np.uint8), axis=0))


@pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium")
def test_chromium_renders_the_viewer(tmp_path):
    gen = register_history(400, keys=2, processes=6, crash_rate=0.05, stale_reads=1, seed=3)
    h = pair(read_events(gen.events))
    verdict = check(h, all_keys=True)
    page = tmp_path / "view.html"
    page.write_text(render_html(h, verdict))
    png = tmp_path / "shot.png"
    profile = tmp_path / "profile"
    cmd = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--screenshot={png}",
        "--window-size=1400,900",
        page.as_uri(),
    ]
    subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    try:
        assert png.exists(), "chromium wrote no screenshot"
        size, colours = png_size_and_colours(png)
        assert size == (900, 1400)
        assert colours > 20  # bars, text, bands: not a blank page
    finally:
        shutil.rmtree(profile, ignore_errors=True)
