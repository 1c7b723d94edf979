"""Pairs people download pad one vocabulary to different sizes: tiny models with the real configs' vocabularies.

Each model is LitGPT's own config of that name (`Config.from_name`), shrunk to one small layer but keeping its
`vocab_size` and `padded_vocab_size`, so the draft and the target differ exactly as the real checkpoints do.
"""

from __future__ import annotations

import litgpt.generate.speculative_decoding as speculative
import pytest
import torch
from litgpt import GPT, Config
from litgpt.generate import base

from demo import tiny_checkpoints

SMALL = dict(n_embd=32, n_head=2, n_query_groups=2, head_size=16, intermediate_size=64, block_size=64)
PAIRS = [  # (draft, target): padded 151936 -> 152064, 50304 -> 50432, and the other way round
    ("Qwen2.5-0.5B", "Qwen2.5-7B"),
    ("pythia-160m", "pythia-6.9b"),
    ("Qwen2.5-7B", "Qwen2.5-0.5B"),
    ("pythia-12b", "pythia-1b"),
]
MAX_RETURNED_TOKENS = 24


def pair(draft_name: str, target_name: str) -> tuple[GPT, GPT]:
    """A random 2-layer target and, as draft, its first layer with the draft's vocabulary padding and a sharper head."""
    target_config = Config.from_name(target_name, n_layer=2, **SMALL)
    draft_config = Config.from_name(draft_name, n_layer=1, **SMALL)
    assert draft_config.vocab_size == target_config.vocab_size
    assert draft_config.padded_vocab_size != target_config.padded_vocab_size
    torch.manual_seed(0)
    target = GPT(target_config)
    draft = tiny_checkpoints.truncated_draft(target, draft_config)
    return draft, target


def fresh(*models: GPT) -> None:
    for model in models:
        model.max_seq_length = MAX_RETURNED_TOKENS
        model.set_kv_cache(batch_size=1)
        model.eval()


@pytest.mark.parametrize(("draft_name", "target_name"), PAIRS)
def test_greedy_output_is_target_alone(draft_name, target_name):
    draft, target = pair(draft_name, target_name)
    prompt = torch.tensor([1, 2, 3, 500, 20_000])
    fresh(target)
    with torch.inference_mode():
        expected = base.generate(target, prompt, MAX_RETURNED_TOKENS, temperature=0.0)
    fresh(draft, target)
    out, acceptance_rate = speculative.generate(
        draft, target, prompt, MAX_RETURNED_TOKENS, temperature=0.0, speculative_k=4
    )
    assert out.tolist() == expected.tolist()
    assert 0.0 < acceptance_rate < 1.0  # draft tokens are accepted and rejected: both paths run


@pytest.mark.parametrize(("draft_name", "target_name"), PAIRS)
@pytest.mark.parametrize(("top_k", "top_p"), [(50, 1.0), (None, 0.9)])
def test_sampling_runs_to_the_requested_length(draft_name, target_name, top_k, top_p):
    draft, target = pair(draft_name, target_name)
    prompt = torch.tensor([1, 2, 3])
    fresh(draft, target)
    torch.manual_seed(1)
    out, _ = speculative.generate(
        draft, target, prompt, MAX_RETURNED_TOKENS, temperature=1.0, top_k=top_k, top_p=top_p, speculative_k=3
    )
    assert out.size(0) == MAX_RETURNED_TOKENS
    assert out.max() < target.config.padded_vocab_size
