"""Fixtures that upstream's own test modules (build/upstream/tests, run by `make test`) take from upstream's
tests/conftest.py, which its sdist does not ship: written here for those tests, not copied."""

from __future__ import annotations

import json
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


class _CharTokenizer:
    """Encodes each character as its code point, with 0 and 1 as the beginning and the end of a sequence."""

    bos_id, eos_id = 0, 1

    def encode(self, text: str, bos: bool | None = None, eos: bool = False, max_length: int = -1) -> torch.Tensor:
        ids = [self.bos_id] * bool(bos) + [ord(char) for char in text] + [self.eos_id] * eos
        return torch.tensor(ids[:max_length] if max_length > 0 else ids)

    def decode(self, tokens: torch.Tensor) -> str:
        return "".join(map(chr, tokens.tolist()))


@pytest.fixture
def mock_tokenizer() -> _CharTokenizer:
    return _CharTokenizer()


@pytest.fixture
def alpaca_path(tmp_path) -> Path:
    """An Alpaca-format JSON file of 24 instructions (made here: upstream's data fixtures are not in its sdist)."""
    records = [
        {"instruction": f"Add {a} and {b}.", "input": "" if a % 2 else f"{a}, {b}", "output": f"{a} + {b} = {a + b}."}
        for a, b in zip(range(24), range(7, 31))
    ]
    path = tmp_path / "alpaca.json"
    path.write_text(json.dumps(records, indent=2))
    return path
