"""The litgpt a user gets from `pip install`: our version, upstream's CLI, and the fixed speculative decoding."""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.metadata import distribution

import upstream_tree

from .conftest import ROOT

REPRODUCTION = """
from unittest.mock import patch
import torch
from torch import nn
import litgpt.generate.speculative_decoding as generation

model = nn.Module()
model.max_seq_length = 10
prompt = torch.tensor([1, 2])
with (
    patch.object(generation, "next_token", side_effect=[torch.tensor([9]), torch.tensor([7])]),
    patch.object(generation, "speculative_decoding", side_effect=[torch.tensor([8]), torch.tensor([8])]),
):
    output, _ = generation.generate(model, model, prompt, 5, speculative_k=1)
print(output.tolist())
"""


def test_installed_version_is_this_checkouts_patch_series(pin):
    expected = upstream_tree.local_version(pin, upstream_tree.read_series(ROOT / "patches"))
    assert distribution("litgpt").version == expected


def test_litgpt_console_script_runs():
    exe = shutil.which("litgpt")
    assert exe, "the litgpt console script is not on PATH"
    out = subprocess.run([exe, "generate_speculatively", "-h"], capture_output=True, text=True, check=True).stdout
    assert "--speculative_k" in out


def test_issue_reproduction_returns_the_prefill_token():
    result = subprocess.run([sys.executable, "-c", REPRODUCTION], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[1, 2, 7, 8, 8]"  # 0.5.13 prints [1, 2, 8, 8]
