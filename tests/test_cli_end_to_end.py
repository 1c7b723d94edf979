"""`litgpt generate_speculatively` against `litgpt generate` on tiny real checkpoints, as subprocesses."""

from __future__ import annotations

import pytest

import cli
import tiny_checkpoints

GREEDY = ["--temperature", "0", "--precision", "32-true", "--max_new_tokens", "20"]


@pytest.fixture(scope="module")
def same_pair(tmp_path_factory):
    """The draft is the target: every draft token is accepted."""
    return tiny_checkpoints.build_pair(tmp_path_factory.mktemp("same"))


@pytest.mark.parametrize("speculative_k", [1, 3])
def test_greedy_speculative_completion_equals_target_alone(same_pair, speculative_k):
    draft, target = same_pair
    prompt = "the llama eats"
    alone = cli.generate(target, prompt, *GREEDY)
    spec = cli.generate_speculatively(draft, target, prompt, *GREEDY, "--speculative_k", str(speculative_k))
    assert len(alone.text.split()) == len(prompt.split()) + 20  # no <eos> within 20 tokens for this pair
    assert spec.text == alone.text
    assert spec.acceptance_rate == 1.0
