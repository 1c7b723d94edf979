"""Speculative decoding is lossless: greedy output is the target's own, sampled tokens follow the target's law.

Property tests over random tiny draft/target pairs (hypothesis, derandomized so every run checks the same cases)
and a seeded chi-square test of the first token of a round against the target's `sample()` distribution.
"""

from __future__ import annotations

import litgpt.generate.speculative_decoding as speculative
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litgpt import GPT, Config
from litgpt.generate import base
from litgpt.generate.auto_speculative_k import AutoPromptLookupK
from litgpt.generate.prompt_lookup import LookupCache
from scipy.stats import chisquare
from torch import nn

from demo import tiny_checkpoints

VOCAB = 12
PROPERTY = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def with_kv_cache(model: GPT, max_seq_length: int) -> GPT:
    model.max_seq_length = max_seq_length  # the least that generate() must accept
    model.set_kv_cache(batch_size=1)
    return model.eval()


def greedy_case(target_seed, draft_seed, truncated_draft, prompt, max_new_tokens, draft_padding, target_padding):
    """A random target, a draft (random, or the target's first layer with a sharper head) and the target's output.

    Each model pads the vocabulary with its own number of ids, as real pairs do (Qwen2.5-0.5B and Qwen2.5-7B).
    """
    config = dict(
        vocab_size=VOCAB, padded_vocab_size=VOCAB + target_padding, block_size=64, n_layer=2, n_head=2, n_embd=8
    )
    target = tiny_checkpoints.random_model(config, target_seed)
    draft_config = {**config, "n_layer": 1, "padded_vocab_size": VOCAB + draft_padding}
    if truncated_draft:
        draft = tiny_checkpoints.truncated_draft(target, draft_config)
    else:
        draft = tiny_checkpoints.random_model(draft_config, draft_seed)
    max_returned_tokens = len(prompt) + max_new_tokens
    prompt = torch.tensor(prompt)
    with torch.inference_mode():
        expected = base.generate(with_kv_cache(target, max_returned_tokens), prompt, max_returned_tokens, temperature=0)
    with_kv_cache(target, max_returned_tokens)  # a fresh cache, as the CLI resets it between samples
    return with_kv_cache(draft, max_returned_tokens), target, prompt, max_returned_tokens, expected.tolist()


greedy_cases = dict(
    target_seed=st.integers(0, 10_000),
    draft_seed=st.integers(0, 10_000),
    truncated_draft=st.booleans(),
    prompt=st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=6),
    speculative_k=st.integers(1, 6) | st.just("auto"),
    max_new_tokens=st.integers(1, 12),
    # drawn independently: the draft pads less, as much as, or more than the target
    draft_padding=st.integers(0, 6),
    target_padding=st.integers(0, 6),
)


@PROPERTY
@given(**greedy_cases)
def test_greedy_speculative_output_is_target_greedy_output(
    target_seed, draft_seed, truncated_draft, prompt, speculative_k, max_new_tokens, draft_padding, target_padding
):
    draft, target, prompt, max_returned_tokens, expected = greedy_case(
        target_seed, draft_seed, truncated_draft, prompt, max_new_tokens, draft_padding, target_padding
    )
    out, acceptance_rate = speculative.generate(
        draft, target, prompt, max_returned_tokens, temperature=0.0, speculative_k=speculative_k
    )
    assert out.tolist() == expected
    assert out.size(0) == max_returned_tokens
    assert 0.0 <= acceptance_rate <= 1.0


def cut_before_first_stop(tokens: list[int], stop_tokens: tuple[list[int], ...]) -> list[int]:
    """The reference: end just before the first stop sequence to complete (the longest, if several do at once)."""
    for end in range(1, len(tokens) + 1):
        done = [len(seq) for seq in stop_tokens if len(seq) <= end and tokens[end - len(seq) : end] == seq]
        if done:
            return tokens[: end - max(done)]
    return tokens


@PROPERTY
@given(**greedy_cases, data=st.data())
def test_greedy_speculative_output_stops_before_first_stop_sequence(
    target_seed, draft_seed, truncated_draft, prompt, speculative_k, max_new_tokens, draft_padding, target_padding, data
):
    draft, target, prompt_t, max_returned_tokens, expected = greedy_case(
        target_seed, draft_seed, truncated_draft, prompt, max_new_tokens, draft_padding, target_padding
    )
    generated = expected[len(prompt) :]
    # stop sequences taken from the output itself (so they do occur), plus possibly one that may not
    slices = st.tuples(st.integers(0, len(generated) - 1), st.integers(1, 3)).map(
        lambda s: generated[s[0] : s[0] + s[1]]
    )
    stop_tokens = tuple(
        data.draw(
            st.lists(slices | st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=2), min_size=1, max_size=3),
            label="stop_tokens",
        )
    )

    out, _ = speculative.generate(
        draft,
        target,
        prompt_t,
        max_returned_tokens,
        temperature=0.0,
        stop_tokens=stop_tokens,
        speculative_k=speculative_k,
    )
    assert out.tolist() == prompt + cut_before_first_stop(generated, stop_tokens)


class FixedLogits(nn.Module):
    """A "model" that predicts the same logits at every position, over a vocabulary of their number."""

    def __init__(self, logits: list[float]) -> None:
        super().__init__()
        self.register_buffer("logits", torch.tensor(logits))
        self.config = Config(padded_vocab_size=len(logits))
        self.max_seq_length = 1 << 20  # no KV cache to size

    def forward(self, idx: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        return self.logits.expand(1, idx.size(1), -1)


TARGET_LOGITS = [2.0, 1.9, 1.0, 0.5, 0.0, -0.5, -1.0, -3.0]
DRAFT_LOGITS = {  # disagree with the target, so rejections happen
    "same vocabulary": [3.0, -1.0, 2.5, 0.0, 1.0, -2.0, 0.5, 1.5],
    # the target's last two ids (with probability > 0) exist only in the target: drawn from the residual
    "draft padded smaller": [3.0, -1.0, 2.5, 0.0, 1.0, -2.0],
    # the draft's favourite ids do not exist in the target: never proposed
    "draft padded larger": [3.0, -1.0, 2.5, 0.0, 1.0, -2.0, 0.5, 1.5, 4.0, 3.5],
}


def target_distribution(temperature: float, top_k: int | None, top_p: float) -> torch.Tensor:
    """What `litgpt.generate.base.sample` draws from for TARGET_LOGITS (top-k, then temperature, then top-p)."""
    logits = torch.tensor(TARGET_LOGITS)
    if top_k is not None:
        v, i = torch.topk(logits, top_k)
        logits = torch.full_like(logits, float("-inf")).scatter_(-1, i, v)
    if temperature == 0.0 or top_p == 0.0:
        return torch.nn.functional.one_hot(logits.argmax(), len(TARGET_LOGITS)).float()
    logits = base.sample_top_p(logits / temperature, top_p) if top_p < 1.0 else logits / temperature
    return torch.softmax(logits, dim=-1)


def assert_draws_follow_target(counts: torch.Tensor, temperature: float, top_k: int | None, top_p: float) -> None:
    """A seeded chi-square test of token counts against the target's distribution (and none outside its support)."""
    expected = target_distribution(temperature, top_k, top_p) * counts.sum()
    support = expected > 0
    assert counts[~support].sum() == 0, f"tokens the target never samples: {counts.tolist()}"
    if support.sum() > 1:
        p_value = chisquare(counts[support].numpy(), expected[support].numpy()).pvalue
        # a correct sampler passes with p spread uniformly over [0, 1]; 1e-4 leaves a wide margin (seeded: no flakes)
        assert p_value > 1e-4, (p_value, counts.tolist(), expected.tolist())


SAMPLING = [(1.0, None, 1.0), (0.7, 3, 1.0), (1.5, None, 0.8), (1.0, 5, 0.6), (0.5, None, 0.95), (0.0, None, 1.0)]


@pytest.mark.parametrize(
    ("draft_logits", "temperature", "top_k", "top_p"),
    [("same vocabulary", *setting) for setting in SAMPLING]
    + [(draft, *SAMPLING[i]) for draft in ("draft padded smaller", "draft padded larger") for i in (0, 2, 3, 5)],
)
def test_first_token_of_round_follows_target_distribution(draft_logits, temperature, top_k, top_p):
    n = 3000
    draft, target = FixedLogits(DRAFT_LOGITS[draft_logits]), FixedLogits(TARGET_LOGITS)
    torch.manual_seed(0)
    counts = torch.zeros(len(TARGET_LOGITS))
    with torch.inference_mode():
        for _ in range(n):
            tokens = speculative.speculative_decoding(
                draft,
                target,
                torch.tensor([0]),
                torch.tensor([0]),
                1,
                speculative_k=3,
                temperature=temperature,
                top_k=top_k,
                top_p=top_p,
            )
            counts[tokens[0]] += 1
    assert_draws_follow_target(counts, temperature, top_k, top_p)


@pytest.mark.parametrize(("temperature", "top_k", "top_p"), [SAMPLING[0], SAMPLING[2], SAMPLING[3]])
@pytest.mark.parametrize("choices", ["measured", "scripted"])
def test_tokens_generated_with_auto_k_follow_target_distribution(monkeypatch, choices, temperature, top_k, top_p):
    """Every token, from rounds or from steps of the target alone, is a draw from the target's distribution."""
    if choices == "scripted":  # both kinds of steps for sure: rounds of 3, 1 and 2 tokens, steps of the target alone
        script = iter([3, 0, 0, 1, 0, 2, 0, 0, 0] * 1000)
        monkeypatch.setattr(speculative.AutoSpeculativeK, "choose", lambda self: next(script))
    draft, target = FixedLogits(DRAFT_LOGITS["same vocabulary"]), FixedLogits(TARGET_LOGITS)
    torch.manual_seed(0)
    # the models' logits do not depend on the context, so the generated tokens are independent draws
    out, _ = speculative.generate(
        draft,
        target,
        torch.tensor([0]),
        1 + 3000,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        speculative_k="auto",
    )
    counts = torch.bincount(out[1:], minlength=len(TARGET_LOGITS)).float()
    assert_draws_follow_target(counts, temperature, top_k, top_p)


def earlier_generations(kind: str, expected: list[int], seed: int) -> LookupCache | None:
    """A cache of earlier generations: none, unrelated random text, or adversarial: the expected text with its tokens
    after each prefix changed, so that long matches propose the wrong continuation with confidence."""
    if kind == "none":
        return None
    cache = LookupCache(max_tokens=200)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(4):
        if kind == "unrelated":
            cache.add(torch.randint(0, VOCAB, (30,), generator=generator).tolist())
        else:
            for cut in range(1, len(expected)):
                cache.add(expected[:cut] + [(expected[cut] + 1) % VOCAB] * 3)
    return cache


@PROPERTY
@given(
    **greedy_cases,
    with_draft=st.booleans(),
    repeats=st.integers(1, 3),
    cached=st.sampled_from(["none", "unrelated", "adversarial"]),
)
def test_greedy_output_with_prompt_lookup_is_target_greedy_output(
    target_seed,
    draft_seed,
    truncated_draft,
    prompt,
    speculative_k,
    max_new_tokens,
    draft_padding,
    target_padding,
    with_draft,
    repeats,
    cached,
):
    # a prompt that repeats itself gives the lookup matches; the random models' outputs repeat too
    draft, target, prompt, max_returned_tokens, expected = greedy_case(
        target_seed, draft_seed, truncated_draft, prompt * repeats, max_new_tokens, draft_padding, target_padding
    )
    lookup_cache = earlier_generations(cached, expected, target_seed)
    out, acceptance_rate = speculative.generate(
        draft if with_draft else None,
        target,
        prompt,
        max_returned_tokens,
        temperature=0.0,
        speculative_k=speculative_k,
        prompt_lookup=True,
        lookup_cache=lookup_cache,
    )
    assert out.tolist() == expected
    assert 0.0 <= acceptance_rate <= 1.0


@pytest.mark.parametrize(("temperature", "top_k", "top_p"), SAMPLING)
@pytest.mark.parametrize("proposed", [0, 2, 7])  # the target's favourite, a likely and an unlikely token
def test_first_token_after_a_looked_up_token_follows_target_distribution(proposed, temperature, top_k, top_p):
    """A looked-up token is a point mass: kept with probability p(x), else replaced by a draw from p without x."""
    n = 3000
    target = FixedLogits(TARGET_LOGITS)
    torch.manual_seed(0)
    counts = torch.zeros(len(TARGET_LOGITS))
    with torch.inference_mode():
        for _ in range(n):
            tokens = speculative.verify(
                target,
                torch.tensor([0]),
                torch.tensor([proposed, proposed]),
                None,
                torch.tensor([0]),
                1,
                temperature=temperature,
                top_k=top_k,
                top_p=top_p,
            )
            counts[tokens[0]] += 1
    assert_draws_follow_target(counts, temperature, top_k, top_p)


@pytest.mark.parametrize(("temperature", "top_k", "top_p"), [SAMPLING[0], SAMPLING[2], SAMPLING[3]])
@pytest.mark.parametrize(("with_draft", "cached"), [(False, False), (True, False), (False, True)])
def test_tokens_generated_with_prompt_lookup_follow_target_distribution(
    monkeypatch, with_draft, cached, temperature, top_k, top_p
):
    """Every token, from lookup rounds, draft rounds or steps of the target alone, is a draw from the target's law,
    also where earlier generations propose the same unlikely token after everything."""
    # proposals of up to 3, 1 and 2 tokens and none, whatever they cost
    script = iter([3, 0, 1, 0, 2, 0, 0] * 1000)
    monkeypatch.setattr(
        AutoPromptLookupK,
        "choose",
        lambda self, n, probabilities: min(next(script), len(probabilities)),
    )
    draft = FixedLogits(DRAFT_LOGITS["same vocabulary"]) if with_draft else None
    target = FixedLogits(TARGET_LOGITS)
    lookup_cache = None
    if cached:
        lookup_cache = LookupCache()
        for token in range(len(TARGET_LOGITS)):
            lookup_cache.add([token, 7, 7, 7] * 50)  # 7: an unlikely token
    torch.manual_seed(0)
    out, _ = speculative.generate(
        draft,
        target,
        torch.tensor([0, 1, 2, 0, 1]),
        5 + 3000,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        speculative_k=2,
        prompt_lookup=True,
        lookup_cache=lookup_cache,
    )
    counts = torch.bincount(out[5:], minlength=len(TARGET_LOGITS)).float()
    assert_draws_follow_target(counts, temperature, top_k, top_p)
