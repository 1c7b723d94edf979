"""`litgpt generate_speculatively` against `litgpt generate` on tiny real checkpoints: the commands in this process
(`litgpt_in_process`), those that compile as subprocesses."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from demo import cli as console_script
from demo import tiny_checkpoints

from . import litgpt_in_process as cli

GREEDY = ["--temperature", "0", "--precision", "32-true", "--max_new_tokens", "20"]


@pytest.fixture(scope="module")
def same_pair(tmp_path_factory):
    """The draft is the target: every draft token is accepted."""
    return tiny_checkpoints.build_pair(tmp_path_factory.mktemp("same"), same=True)


@pytest.mark.parametrize("speculative_k", [1, 3])
def test_greedy_speculative_completion_equals_target_alone(same_pair, speculative_k):
    draft, target = same_pair
    prompt = "the llama eats"
    alone = cli.generate(target, prompt, *GREEDY)
    spec = cli.generate_speculatively(draft, target, prompt, *GREEDY, "--speculative_k", str(speculative_k))
    assert len(alone.text.split()) == len(prompt.split()) + 20  # no <eos> within 20 tokens for this pair
    assert spec.text == alone.text
    assert spec.acceptance_rate == 1.0


@pytest.fixture(scope="module")
def different_pair(tmp_path_factory):
    """A 1-layer draft that agrees with the target on many tokens but is over-confident."""
    return tiny_checkpoints.build_pair(tmp_path_factory.mktemp("different"))


@pytest.mark.parametrize("prompt", ["the llama eats", "a small alpaca runs in the field"])
def test_greedy_speculative_completion_with_other_draft_equals_target_alone(different_pair, prompt):
    draft, target = different_pair
    alone = cli.generate(target, prompt, *GREEDY)
    spec = cli.generate_speculatively(draft, target, prompt, *GREEDY, "--speculative_k", "3")
    assert spec.text == alone.text
    assert 0.0 < spec.acceptance_rate < 1.0  # the draft really differs, and is useful


def test_top_p_sampling_runs(different_pair):
    draft, target = different_pair
    options = ["--temperature", "1.0", "--top_p", "0.9", "--max_new_tokens", "30", "--num_samples", "3"]
    run = cli.generate_speculatively(draft, target, "the llama eats", *options, "--speculative_k", "4")
    assert run.text.startswith("the llama eats")
    assert run.acceptance_rate is not None


@pytest.mark.parametrize(
    ("padded_vocab_sizes", "prompt"),
    # the random target picks padding ids too: with (64, 128), ids that the draft does not have
    [((64, 128), "the llama eats"), ((128, 64), "a small alpaca runs in the field")],
)
def test_greedy_speculative_completion_with_differently_padded_draft_equals_target_alone(
    tmp_path, padded_vocab_sizes, prompt
):
    # one tokenizer, vocabularies padded to different sizes (as Qwen2.5-0.5B and Qwen2.5-7B are)
    draft, target = tiny_checkpoints.build_pair(tmp_path, padded_vocab_sizes=padded_vocab_sizes)
    alone = cli.generate(target, prompt, *GREEDY)
    spec = cli.generate_speculatively(draft, target, prompt, *GREEDY, "--speculative_k", "3")
    assert spec.text == alone.text
    assert 0.0 < spec.acceptance_rate < 1.0  # draft tokens are accepted and rejected


def test_draft_with_another_tokenizer_is_refused(tmp_path):
    # as many tokens as the target's tokenizer, but other ids: the sizes agree, the vocabularies do not
    draft, target = tiny_checkpoints.build_pair(tmp_path, draft_words=tiny_checkpoints.WORDS[::-1])
    with pytest.raises(RuntimeError) as error:
        cli.generate_speculatively(draft, target, "the llama eats", *GREEDY)
    message = str(error.value)
    assert f"ValueError: The draft model ({draft}) and the target model ({target}) must share a tokenizer" in message
    assert "differ in the id of the token" in message


def test_compiled_speculative_completion_equals_target_alone(different_pair, monkeypatch):
    draft, target = different_pair
    prompt = "the llama eats"
    monkeypatch.setenv("TORCH_LOGS", "recompiles")  # torch logs each recompilation to stderr
    alone = cli.generate(target, prompt, *GREEDY)
    spec = console_script.generate_speculatively(
        draft, target, prompt, *GREEDY, "--speculative_k", "3", "--compile", "true", "--num_samples", "2"
    )
    assert spec.text == alone.text
    assert 0.0 < spec.acceptance_rate < 1.0
    # the first sample compiles the prefill, the draft step and the verification; the second reuses them
    first_sample, _, second_sample = spec.stderr.partition("Time for inference 1:")
    assert "Time for inference 2:" in second_sample
    assert "Recompiling" not in second_sample


def test_auto_speculative_k_completion_equals_target_alone(different_pair):
    draft, target = different_pair
    prompt = "a small alpaca runs in the field"
    alone = cli.generate(target, prompt, *GREEDY)
    spec = cli.generate_speculatively(draft, target, prompt, *GREEDY, "--speculative_k", "auto")
    assert spec.text == alone.text


@pytest.mark.parametrize("options", [("--speculative_k", "0"), ("--speculative_k", "auto", "--speculative_k_max", "0")])
def test_bad_speculative_k_is_refused_before_loading(different_pair, options):
    draft, target = different_pair
    with pytest.raises(RuntimeError) as error:
        cli.generate_speculatively(draft, target, "the llama eats", *GREEDY, *options)
    assert f"ValueError: {options[-2][2:]} must be an integer >= 1" in str(error.value)
    assert "Loading draft model" not in str(error.value)


def test_auto_speculative_k_continues_from_sample_to_sample(different_pair, monkeypatch, capsys):
    # in the process, to see what the CLI's main() passes to generate() for each of --num_samples
    from litgpt.generate import speculative_decoding

    draft, target = different_pair
    passed = []

    def generate(*args, speculative_k, _generate=speculative_decoding.generate, **kwargs):
        passed.append(speculative_k)
        return _generate(*args, speculative_k=speculative_k, **kwargs)

    monkeypatch.setattr(speculative_decoding, "generate", generate)
    speculative_decoding.main(
        draft_model_checkpoint_dir=draft,
        target_model_checkpoint_dir=target,
        prompt="the llama eats",
        num_samples=3,
        max_new_tokens=20,
        temperature=0.0,
        precision="32-true",
        speculative_k="auto",
    )
    assert len(passed) == 3
    assert isinstance(passed[0], speculative_decoding.AutoSpeculativeK)
    assert passed[0] is passed[1] is passed[2]  # the later samples go on with what the earlier ones measured
    assert capsys.readouterr().out.count("Acceptance rate:") == 3


def test_later_samples_look_up_the_earlier_samples_outputs(different_pair, monkeypatch):
    # in the process, to see what `litgpt generate` passes to generate() for each of --num_samples
    from litgpt.__main__ import generate_fn
    from litgpt.generate import speculative_decoding

    _, target = different_pair
    calls = []

    def generate(*args, lookup_cache, _generate=speculative_decoding.generate, **kwargs):
        counts = speculative_decoding.DraftCounts()
        out = _generate(*args, lookup_cache=lookup_cache, counts=counts, **kwargs)
        calls.append((lookup_cache, counts.accepted_tokens, out[0].tolist()))
        return out

    monkeypatch.setattr(speculative_decoding, "generate", generate)
    generate_fn(
        target, "a small alpaca runs in the field", max_new_tokens=30, temperature=0.0, precision="32-true",
        prompt_lookup=True, num_samples=2,
    )  # fmt: skip
    (first, copied, out), (second, accepted, again) = calls
    assert first is second and len(first) > 0  # one cache for the run, holding the outputs
    assert accepted > copied  # the second sample looked up the first's output
    assert again == out  # greedy: the same output (the target's, as the test above checks without a cache)


@pytest.mark.parametrize("command", ["generate", "generate_speculatively"])
def test_bad_lookup_cache_tokens_is_refused_before_loading(different_pair, command):
    draft, target = different_pair
    checkpoints = (target,) if command == "generate" else (draft, target)
    options = ("--prompt_lookup", "true", "--lookup_cache_tokens", "-1")
    with pytest.raises(RuntimeError) as error:
        cli.litgpt(command, *map(str, checkpoints), "--prompt", "the llama eats", *GREEDY, *options)
    assert "ValueError: lookup_cache_tokens must be an integer >= 0 (0: off), got -1" in str(error.value)
    assert "Loading" not in str(error.value)


COUNT_GRAPHS = """
import sys
from pathlib import Path
from torch._dynamo.utils import counters
from litgpt.__main__ import generate_fn  # what `litgpt generate` runs
generate_fn(Path(sys.argv[1]), sys.argv[2], max_new_tokens=20, temperature=0.0, precision="32-true", compile=True,
            prompt_lookup=True, num_samples=2)
print("GRAPHS", counters["stats"]["unique_graphs"])
"""


def test_prompt_lookup_through_litgpt_generate_equals_target_alone(different_pair):
    _, target = different_pair
    prompt = "the llama eats grass the llama eats hay the llama eats"
    alone = cli.generate(target, prompt, *GREEDY)
    lookup = cli.generate(target, prompt, *GREEDY, "--prompt_lookup", "true")
    assert lookup.text == alone.text
    assert "'prompt_lookup': True" in lookup.stdout


def test_compiled_prompt_lookup_equals_target_alone_with_few_graphs(different_pair):
    _, target = different_pair
    prompt = "the llama eats grass the llama eats hay the llama eats"
    alone = cli.generate(target, prompt, *GREEDY)
    result = subprocess.run(
        [sys.executable, "-c", COUNT_GRAPHS, str(target), prompt], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count(alone.text) == 2  # both samples
    graphs = int(result.stdout.rsplit("GRAPHS", 1)[1])
    # the prefill, the target's step and one verification per number of tokens proposed (at most 16: auto's cap)
    assert 3 <= graphs <= 2 + 16, result.stdout


@pytest.fixture(scope="module")
def chat_alone(different_pair):
    """`litgpt chat`'s replies to three turns, the third asking what the first asked."""
    turns = ["the llama eats grass", "a small alpaca runs in the field", "the llama eats grass"]
    return turns, cli.chat(different_pair[1], turns, *GREEDY)[0]


@pytest.mark.parametrize(
    "speculative",
    [
        ["--prompt_lookup", "true"],
        ["--draft_model", "{draft}", "--speculative_k", "2"],
        ["--draft_model", "{draft}", "--prompt_lookup", "true"],
    ],
)
def test_chat_with_speculative_decoding_replies_what_chat_replies_alone(different_pair, chat_alone, speculative):
    draft, target = different_pair
    options = [option.format(draft=draft) for option in speculative]
    turns, alone = chat_alone
    replies, stderr = cli.chat(target, turns, *GREEDY, *options)
    assert replies == alone and len(replies) == 3 and len(" ".join(replies).split()) > 15
    accepted = [int(n) for n in re.findall(r"Acceptance rate: .*\((\d+) of \d+ proposed tokens\)", stderr)]
    assert len(accepted) == 3
    if "--prompt_lookup" in options:
        assert accepted[2] > accepted[0]  # the third turn asks what the first asked: its reply is looked up
