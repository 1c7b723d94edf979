"""PEP 517 build backend: the pinned LitGPT sdist + ``patches/`` -> a complete ``litgpt`` wheel.

The wheel is built by upstream's own backend (setuptools, upstream's pyproject.toml) from the patched tree, so it
has every upstream module, the same dependencies and the same ``litgpt`` console script; only the version gains a
PEP 440 local label. Our own sdist carries the patches and this backend, never upstream code.

Offline builds: set ``LITGPT_UPSTREAM_SDIST=/path/to/litgpt-0.5.13.tar.gz`` or pass
``--config-settings upstream-sdist=/path/to/litgpt-0.5.13.tar.gz``.
"""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
from contextlib import contextmanager
from pathlib import Path

import upstream_tree

ROOT = Path(__file__).resolve().parent.parent
# What our sdist carries: enough to rebuild the wheel, nothing from upstream.
SDIST_FILES = ["pyproject.toml", "README.md", "CHANGELOG.md", "LICENSE", "NOTICE", "backend", "patches"]


@contextmanager
def _patched_tree(config_settings: dict | None):
    sdist = (config_settings or {}).get("upstream-sdist")
    with tempfile.TemporaryDirectory(prefix="litgpt-fork-") as tmp:
        tree, version = upstream_tree.patched_tree(ROOT, Path(tmp), sdist)
        upstream_tree.set_version(tree, upstream_tree.read_pin(ROOT).version, version)
        cwd = os.getcwd()
        os.chdir(tree)  # setuptools builds the project in the current directory
        try:
            yield tree
        finally:
            os.chdir(cwd)


def build_wheel(
    wheel_directory: str, config_settings: dict | None = None, metadata_directory: str | None = None
) -> str:
    from setuptools import build_meta

    wheel_directory = os.path.abspath(wheel_directory)
    with _patched_tree(config_settings):
        return build_meta.build_wheel(wheel_directory)


def _pkg_info(version: str) -> str:
    return f"Metadata-Version: 2.1\nName: litgpt\nVersion: {version}\nSummary: LitGPT with speculative decoding fixes\n"


def build_sdist(sdist_directory: str, config_settings: dict | None = None) -> str:
    pin = upstream_tree.read_pin(ROOT)
    version = upstream_tree.local_version(pin, upstream_tree.read_series(ROOT / "patches"))
    base = f"litgpt-{version}"
    path = Path(sdist_directory) / f"{base}.tar.gz"
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name in SDIST_FILES:
            tar.add(ROOT / name, arcname=f"{base}/{name}", filter=_skip_caches)
        pkg_info = _pkg_info(version).encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(pkg_info)
        tar.addfile(info, io.BytesIO(pkg_info))
    return path.name


def _skip_caches(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    return None if "__pycache__" in info.name or info.name.endswith(".pyc") else info
