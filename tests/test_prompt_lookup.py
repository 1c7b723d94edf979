"""Prompt lookup's suffix index against a brute-force search over random token lists (hypothesis, derandomized), and
its cache of earlier generations: eviction at the bound, proposals from the kept generations only, its memory."""

from __future__ import annotations

import random
import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st
from litgpt.generate.prompt_lookup import LOOKUP_CACHE_TOKENS, SEPARATOR, LookupCache, PromptLookup

PROPERTY = settings(max_examples=300, deadline=None, derandomize=True)
tokens = st.lists(st.integers(0, 3), max_size=60)  # few distinct tokens: many matches, long and short


def brute_force_proposal(
    sources: list[list[int]], text: list[int], limit: int, max_match: int, min_probability: float, min_match=(1,)
) -> tuple[list[int], list[float], int]:
    """What `PromptLookup.propose` must return, by comparing the end of `text` with every position of `sources`, where
    a match in `sources[i]` counts from `min_match[i]` tokens on."""
    tail = text[-max_match:]

    def match_length(source: list[int], end: int) -> int:
        length = 0
        while length < len(tail) and end - length - 1 >= 0 and source[end - length - 1] == tail[-length - 1]:
            length += 1
        return length

    found = [
        (source, end, match_length(source, end))
        for source, least in zip(sources, min_match * len(sources) if len(min_match) == 1 else min_match)
        for end in range(1, len(source))
        if source[end] != SEPARATOR and match_length(source, end) >= least  # followed by a token, long enough
    ]
    longest = max((length for _, _, length in found), default=0)
    if longest == 0:
        return [], [], 0
    branch = [(source, end) for source, end, length in found if length == longest][::-1]
    proposal, probabilities, probability = [], [], 1.0
    while branch and len(proposal) < limit:
        following = [source[end + len(proposal)] for source, end in branch if end + len(proposal) < len(source)]
        if not following:
            break
        # the most frequent, the latest among equals
        token = max(following, key=lambda t: (following.count(t), -following.index(t)))
        if token == SEPARATOR:
            break
        probability *= following.count(token) / len(following)
        if probability < min_probability:
            break
        proposal.append(token)
        probabilities.append(probability)
        branch = [
            (source, end)
            for source, end in branch
            if end + len(proposal) - 1 < len(source) and source[end + len(proposal) - 1] == token
        ]
    return proposal, probabilities, longest


@PROPERTY
@given(
    prompt=tokens,
    generated=st.lists(tokens, max_size=4),
    max_ngram=st.integers(1, 4),
    max_match=st.integers(1, 12),
    limit=st.integers(0, 10),
    min_probability=st.sampled_from([0.0, 0.1, 0.5]),
)
def test_proposal_is_the_brute_force_searchs(prompt, generated, max_ngram, max_match, limit, min_probability):
    lookup = PromptLookup(prompt, max_ngram=max_ngram, max_match=max_match, max_occurrences=10**6)
    lookup.min_probability = min_probability
    text = list(prompt)
    for piece in generated:  # extended piece by piece, as rounds are accepted
        lookup.extend(piece)
        text += piece
        proposal, probabilities, length = lookup.propose(limit)
        expected = brute_force_proposal([text], text, limit, max_match, min_probability)
        assert (proposal, length) == (expected[0], expected[2])
        assert probabilities == expected[1]
        assert all(1.0 >= p >= q >= min_probability for p, q in zip([1.0] + probabilities, probabilities))


def test_proposal_follows_the_latest_occurrences_only_up_to_max_occurrences():
    text = [9, 1, 2, 3, 8, 1, 2, 3, 7, 1, 2, 4, 6, 1, 2]
    assert PromptLookup(text).propose(1) == ([3], [2 / 3], 2)
    assert PromptLookup(text, max_occurrences=1).propose(1) == ([4], [1.0], 2)


@PROPERTY
@given(
    earlier=st.lists(tokens, max_size=8),
    prompt=tokens,
    max_tokens=st.integers(0, 80),
    max_match=st.integers(1, 12),
    limit=st.integers(0, 10),
)
def test_proposal_from_earlier_generations_is_the_brute_force_searchs(earlier, prompt, max_tokens, max_match, limit):
    cache = LookupCache(max_tokens)
    kept = []  # what the cache must keep: the latest generations, whole, but the newest if it alone is too long
    for generation in earlier:
        cache.add(generation)
        kept = ([generation[-max_tokens:]] if max_tokens and generation else []) + kept
        while sum(map(len, kept)) > max_tokens:
            kept.pop()
        assert len(cache) == sum(map(len, kept))
        # evicted tokens are dropped from the index once they outnumber the kept ones
        assert len(cache.tokens) - cache.start <= 2 * (len(cache) + len(kept)) + max_tokens + 1
    lookup = PromptLookup(prompt, max_match=max_match, max_occurrences=10**6, cache=cache)
    sources = [token for generation in kept[::-1] for token in generation + [SEPARATOR]]
    # a match among earlier generations is at least two tokens long
    expected = brute_force_proposal([sources, prompt], prompt, limit, max_match, lookup.min_probability, (2, 1))
    assert lookup.propose(limit) == expected


def test_cache_memory_per_token():
    """The measured bytes per kept token of a full cache, for generations of real-sized token ids, stay under 1 KB."""
    random.seed(0)
    tracemalloc.start()
    cache = LookupCache(LOOKUP_CACHE_TOKENS)
    for _ in range(2 * LOOKUP_CACHE_TOKENS // 200):  # twice the bound: evicted and rebuilt at least once
        cache.add([random.randrange(49152) for _ in range(200)])
    memory, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert LOOKUP_CACHE_TOKENS - 200 < len(cache) <= LOOKUP_CACHE_TOKENS  # whole generations are evicted
    assert memory / len(cache) < 1024, memory / len(cache)
    cache.resize(0)
    assert len(cache) == 0 and cache.tokens == []
