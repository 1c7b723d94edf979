"""`python -m build`: our sdist carries patches and backend only, and the wheel built from it is litgpt 0.5.13+."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile

import upstream_tree

from .conftest import ROOT


def test_python_m_build_sdist_then_wheel(pin, upstream_sdist, tmp_path):
    # isolated build environments, as a user's `python -m build` makes them; the upstream sdist comes from the
    # config setting so this test does not depend on the download path (tested in test_backend.py)
    cmd = [sys.executable, "-m", "build", "--outdir", str(tmp_path), f"-Cupstream-sdist={upstream_sdist}", str(ROOT)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    version = upstream_tree.local_version(pin, upstream_tree.read_series(ROOT / "patches"))
    (sdist,) = tmp_path.glob("*.tar.gz")
    (wheel,) = tmp_path.glob("*.whl")
    assert sdist.name == f"litgpt-{version}.tar.gz"
    assert wheel.name == f"litgpt-{version}-py3-none-any.whl"

    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    assert {"pyproject.toml", "PKG-INFO", "patches/series", "backend/fork_backend.py", "LICENSE", "NOTICE"} <= members
    assert not [m for m in members if m.startswith(("litgpt/", "tests/"))], "upstream code in our sdist"

    with zipfile.ZipFile(wheel) as whl:
        assert "litgpt/generate/speculative_decoding.py" in whl.namelist()
        assert f"Version: {version}" in whl.read(f"litgpt-{version}.dist-info/METADATA").decode()
