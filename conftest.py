"""Fixtures that upstream's own test modules (build/upstream/tests, run by `make test`) take from upstream's
tests/conftest.py, which its sdist does not ship: written here for those tests, not copied."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


@pytest.fixture
def fake_checkpoint_dir(tmp_path, monkeypatch) -> Path:
    """A checkpoint folder that passes `check_valid_checkpoint_dir`: its files exist, empty (tests write what they
    read, or mock the loading), with the working directory at its root as upstream's tests expect."""
    monkeypatch.chdir(tmp_path)
    checkpoint_dir = tmp_path / "checkpoints" / "tmp"
    checkpoint_dir.mkdir(parents=True)
    for name in ("lit_model.pth", "model_config.yaml", "tokenizer.json", "tokenizer_config.json"):
        (checkpoint_dir / name).touch()
    return checkpoint_dir


class _AnyTensor:
    """Equal to every tensor, for asserting the calls of a mock without comparing tensors' values."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, torch.Tensor)


@pytest.fixture
def tensor_like() -> _AnyTensor:
    return _AnyTensor()
