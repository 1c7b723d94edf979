"""The README's demo: Zen of Python models trained on the spot, through both CLIs, with identical completions."""

from __future__ import annotations

import subprocess
import sys

from tokenizers import Tokenizer

from demo import tiny_checkpoints, zen
from demo.run import PROMPTS

from .conftest import ROOT


def test_zen_tokenizer_round_trips_the_text():
    text = zen.zen_of_python()
    assert text.startswith("The Zen of Python, by Tim Peters")
    tokenizer = zen.train_tokenizer(text, 320)
    ids = tokenizer.encode(text).ids
    assert len(ids) < 0.6 * len(text.encode())  # merges were learned: fewer tokens than bytes
    assert tokenizer.decode(ids) == text
    assert isinstance(tokenizer.token_to_id(tiny_checkpoints.EOS), int)
    assert isinstance(Tokenizer.from_str(tokenizer.to_str()), Tokenizer)


def test_demo_prints_identical_completions(demo_dir):
    out = demo_dir / "build" / "demo"
    cmd = [sys.executable, "-m", "demo.run", "--out", str(out), "--max_new_tokens", "24"]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # the CLI for each prompt, the Python API once, prompt lookup once
    assert result.stdout.count("identical: yes") == len(PROMPTS) + 2
    assert "Beautiful is better than ugly." in result.stdout  # the target learned the text
    assert "acceptance rate" in result.stdout and "tokens/s" in result.stdout
    assert 'llm.generate(prompt, draft_model=draft, speculative_k="auto")' in result.stdout
    assert "litgpt generate --prompt_lookup true" in result.stdout
