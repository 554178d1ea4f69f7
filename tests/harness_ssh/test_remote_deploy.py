"""The working tree's wheel and the venv it is unpacked into on a host (run locally here with `sh`)."""

from __future__ import annotations

import platform
import subprocess
import zipfile

from harness.backends.remote_deploy import build_wheel, crc32c_wheel, install_script


def test_the_wheel_holds_every_package_and_is_named_by_its_content(tmp_path):
    first = build_wheel(tmp_path / "a")
    second = build_wheel(tmp_path / "b")
    assert first.path.name == second.path.name and first.digest == second.digest  # same tree, same bytes
    names = zipfile.ZipFile(first.path).namelist()
    for module in ("node/runtime/__main__.py", "vocab/errors.py", "harness/backends/remote_ctl.sh"):
        assert module in names
    assert not [n for n in names if "__pycache__" in n or n.startswith("tests/")]
    dist_info = [n for n in names if n.endswith(".dist-info/RECORD")]
    assert len(dist_info) == 1 and first.path.name.startswith("kraft_chaos-0.1.0+t")


def test_install_script_makes_a_venv_that_runs_the_node_and_is_reused(tmp_path):
    wheel = build_wheel(tmp_path / "w")
    crc = crc32c_wheel("311", platform.machine())  # /usr/bin/python3 is Debian 12's 3.11
    root = tmp_path / "host"
    (root / "wheels").mkdir(parents=True)
    for path in (wheel.path, crc):
        (root / "wheels" / path.name).write_bytes(path.read_bytes())
    script = install_script(str(root), "/usr/bin/python3", wheel.digest, [wheel.path.name, crc.name])
    subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    venv = root / "venvs" / wheel.digest
    assert (venv / ".complete").is_file()
    probe = "import crc32c, node.runtime; print(node.runtime.__file__, crc32c.crc32c(b'123456789'))"
    clean = {"PATH": "/usr/bin:/bin"}  # no PYTHONPATH: the venv alone must hold the code
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, check=True, env=clean, cwd=tmp_path
    )
    assert out.stdout.split() == [
        str(venv / "lib" / "python3.11" / "site-packages" / "node" / "runtime" / "__init__.py"),
        str(0xE3069283),
    ]
    (venv / "marker").write_text("kept")
    subprocess.run(["sh", "-c", script], check=True)  # complete already: left alone
    assert (venv / "marker").read_text() == "kept"
