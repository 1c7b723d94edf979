"""The build backend: errors that name their cause, offline builds, and a complete wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

import fork_backend
import upstream_tree
from upstream_tree import ForkBuildError

from .conftest import ROOT


def pip_wheel(project: Path, out: Path, **env: str) -> subprocess.CompletedProcess:
    """``pip wheel`` without build isolation: fast, and the backend's error reaches pip's output."""
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(project)]
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, check=False)


def test_local_version_is_pep440_local(pin):
    version = Version(upstream_tree.local_version(pin, upstream_tree.read_series(ROOT / "patches")))
    assert version.public == pin.version
    assert version.local.startswith(f"{pin.local_label}.{len(upstream_tree.read_series(ROOT / 'patches'))}.g")


def test_corrupted_sdist_fails_the_build_with_sha256_mismatch(upstream_sdist, tmp_path):
    corrupted = tmp_path / upstream_sdist.name
    data = bytearray(upstream_sdist.read_bytes())
    data[len(data) // 2] ^= 0xFF
    corrupted.write_bytes(data)

    result = pip_wheel(ROOT, tmp_path / "wheels", LITGPT_UPSTREAM_SDIST=str(corrupted))

    assert result.returncode != 0
    assert "sha256 mismatch" in result.stdout + result.stderr
    assert str(corrupted) in result.stdout + result.stderr


def test_patch_that_does_not_apply_names_patch_and_file(fork_copy, upstream_sdist, tmp_path):
    (patch,) = (fork_copy / "patches").glob("0001-*.patch")
    text = patch.read_text()
    # change one line the patch removes, so its context no longer matches upstream
    patch.write_text(text.replace("-    tokens = []\n", "-    tokens = list()\n", 1))

    with pytest.raises(ForkBuildError, match=f"patch {patch.name} does not apply") as error:
        upstream_tree.patched_tree(fork_copy, tmp_path / "tree", upstream_sdist)
    assert "litgpt/generate/speculative_decoding.py" in str(error.value)

    result = pip_wheel(fork_copy, tmp_path / "wheels", LITGPT_UPSTREAM_SDIST=str(upstream_sdist))
    assert result.returncode != 0
    assert f"patch {patch.name} does not apply" in result.stdout + result.stderr


def test_series_naming_a_missing_patch_is_an_error(fork_copy, upstream_sdist, tmp_path):
    (fork_copy / "patches" / "series").write_text("9999-missing.patch\n")
    with pytest.raises(ForkBuildError, match="9999-missing.patch"):
        upstream_tree.patched_tree(fork_copy, tmp_path / "tree", upstream_sdist)


def test_download_failure_says_how_to_build_offline(pin, tmp_path, monkeypatch):
    monkeypatch.delenv(upstream_tree.SDIST_ENV, raising=False)
    monkeypatch.setenv(upstream_tree.CACHE_ENV, str(tmp_path / "empty-cache"))
    # no index, no links, no config: pip cannot find the sdist anywhere
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))

    with pytest.raises(ForkBuildError, match=f"could not download {pin.requirement}") as error:
        upstream_tree.fetch_sdist(pin)
    assert upstream_tree.SDIST_ENV in str(error.value)
    assert "upstream-sdist" in str(error.value)


def test_build_downloads_the_pinned_sdist_with_pip(pin, tmp_path, monkeypatch):
    monkeypatch.delenv(upstream_tree.SDIST_ENV, raising=False)
    cache = tmp_path / "cache"

    result = pip_wheel(ROOT, tmp_path / "wheels", LITGPT_FORK_CACHE=str(cache))

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert upstream_tree.sha256_of(cache / pin.sdist_name) == pin.sha256
    assert len(list((tmp_path / "wheels").glob("litgpt-*+*.whl"))) == 1


def test_offline_wheel_from_local_sdist_is_complete_litgpt(pin, upstream_sdist, tmp_path, monkeypatch):
    # nothing to download from and nothing cached: only the config setting can provide the sdist
    monkeypatch.delenv(upstream_tree.SDIST_ENV, raising=False)
    monkeypatch.setenv(upstream_tree.CACHE_ENV, str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")

    name = fork_backend.build_wheel(str(tmp_path), {"upstream-sdist": str(upstream_sdist)})

    version = upstream_tree.local_version(pin, upstream_tree.read_series(ROOT / "patches"))
    assert name == f"litgpt-{version}-py3-none-any.whl"
    with zipfile.ZipFile(tmp_path / name) as wheel:
        files = set(wheel.namelist())
        metadata = wheel.read(f"litgpt-{version}.dist-info/METADATA").decode()
        entry_points = wheel.read(f"litgpt-{version}.dist-info/entry_points.txt").decode()
    tree = upstream_tree.unpack_sdist(upstream_sdist, tmp_path / "upstream")
    upstream_modules = {str(p.relative_to(tree)) for p in (tree / "litgpt").rglob("*.py")}
    assert upstream_modules and upstream_modules <= files
    assert "litgpt = litgpt.__main__:main" in entry_points
    upstream_requires = {line for line in (tree / "PKG-INFO").read_text().splitlines() if line.startswith("Requires-")}
    fork_requires = {line for line in metadata.splitlines() if line.startswith("Requires-")}
    assert fork_requires - upstream_requires == {
        "Requires-Dist: requests>=2.31",  # the litgpt command needs it to start
        'Requires-Dist: prometheus-client>=0.20; extra == "extra"',  # litgpt serve's /metrics
        'Requires-Dist: litserve==0.2.19; extra == "extra"',  # litgpt serve's batching uses its loop's internals
    }
    assert upstream_requires - fork_requires == {'Requires-Dist: litserve>0.2; extra == "extra"'}
