"""`LLM.generate(..., draft_model=...)` on checkpoints made by the fork's tiny-checkpoint tools and `LLM.load`."""

from __future__ import annotations

import pytest
import torch
from litgpt import LLM

from demo import tiny_checkpoints

PROMPTS = ["the llama eats", "a small alpaca runs in the field", "sun and rain"]


def load(checkpoint_dir, **kwargs) -> LLM:
    llm = LLM.load(str(checkpoint_dir), distribute=None)
    llm.distribute(accelerator="cpu", precision="32-true", **kwargs)
    return llm


@pytest.fixture(scope="module", params=[None, (64, 128)], ids=["same padding", "draft padded smaller"])
def pair(request, tmp_path_factory):
    draft_dir, target_dir = tiny_checkpoints.build_pair(
        tmp_path_factory.mktemp("api"), padded_vocab_sizes=request.param
    )
    return load(draft_dir), load(target_dir)


@pytest.mark.parametrize("speculative_k", [3, "auto"])
def test_greedy_results_with_a_draft_are_those_without(pair, speculative_k):
    draft, llm = pair
    kwargs = dict(max_new_tokens=24, temperature=0.0)
    spec = dict(draft_model=draft, speculative_k=speculative_k)
    for prompt in PROMPTS:
        text = llm.generate(prompt, **kwargs)
        assert llm.generate(prompt, **kwargs, **spec) == text
        ids = llm.generate(prompt, return_as_token_ids=True, **kwargs)
        assert llm.generate(prompt, return_as_token_ids=True, **kwargs, **spec).tolist() == ids.tolist()
        # the pieces add up to the text (LitGPT's stream without a draft decodes each token alone, which drops
        # the spaces of this word-level tokenizer)
        assert "".join(llm.generate(prompt, stream=True, **kwargs, **spec)) == text
        streamed = [
            t
            for chunk in llm.generate(prompt, stream=True, return_as_token_ids=True, **kwargs, **spec)
            for t in chunk.tolist()
        ]
        assert streamed == [t.item() for t in llm.generate(prompt, stream=True, return_as_token_ids=True, **kwargs)]
    assert 0.0 <= llm.acceptance_rate <= 1.0


@pytest.mark.parametrize(("top_k", "top_p"), [(10, 1.0), (None, 0.9)])
def test_sampling_with_a_draft_runs_to_the_requested_length(pair, top_k, top_p):
    draft, llm = pair
    eos_id = llm.preprocessor.tokenizer.eos_id
    torch.manual_seed(0)
    for prompt in PROMPTS:
        ids = llm.generate(
            prompt, max_new_tokens=30, top_k=top_k, top_p=top_p, return_as_token_ids=True, draft_model=draft
        )
        assert len(ids) == 30 or ids[-1] == eos_id


def test_a_second_call_with_more_tokens_works(pair):
    draft, llm = pair
    for max_new_tokens in (8, 40):
        expected = llm.generate(PROMPTS[0], max_new_tokens=max_new_tokens, temperature=0.0)
        assert llm.generate(PROMPTS[0], max_new_tokens=max_new_tokens, temperature=0.0, draft_model=draft) == expected


def test_errors_name_what_is_wrong(pair, tmp_path):
    draft, llm = pair
    with pytest.raises(TypeError, match="draft_model must be an LLM"):
        llm.generate("the llama", draft_model="draft")
    with pytest.raises(AttributeError, match="The draft_model is not initialized yet"):
        llm.generate("the llama", draft_model=LLM.load(str(draft.checkpoint_dir), distribute=None))
    with pytest.raises(ValueError, match="speculative_k must be an integer >= 1 or 'auto', got 'fast'"):
        llm.generate("the llama", draft_model=draft, speculative_k="fast")
    other_draft, _ = tiny_checkpoints.build_pair(tmp_path, draft_words=tiny_checkpoints.WORDS[::-1])
    with pytest.raises(ValueError, match="must share a tokenizer"):
        llm.generate("the llama", draft_model=load(other_draft))
