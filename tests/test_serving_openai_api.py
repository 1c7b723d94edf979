"""`litgpt serve --openai_spec true` as a drop-in OpenAI server: `/v1/models`, `/v1/completions`, `logprobs`, `n` and
the `max_tokens` rules, on real servers (subprocesses on free ports) driven by the `openai` client, on tiny checkpoints.
"""

from __future__ import annotations

import openai
import pytest
import torch
from litgpt import LLM

from demo import tiny_checkpoints
from harness import litgpt_server

from .test_serving import TEMPLATE, client

PROMPTS = ["the llama eats grass and the alpaca eats hay", "old on sings runs walks mountain green grass"]
# no --max_new_tokens: an answer without max_tokens runs to the end of the context (64 tokens here)
OPTIONS = ["--openai_spec", "true", "--accelerator", "cpu", "--precision", "32-true", "--temperature", "0"]
BATCH = ["--max_batch_size", "4", "--max_seq_length", "64", "--timeout", "300"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-openai-api")
    draft, target = tiny_checkpoints.build_pair(root)
    (target / "chat_template.jinja").write_text(TEMPLATE)
    return {"root": root, "draft": draft, "target": target}


@pytest.fixture(scope="module")
def servers(checkpoints):
    speculative = ["--prompt_lookup", "true", "--draft_model", str(checkpoints["draft"]), "--speculative_k", "2"]
    configurations = {
        "plain": [*OPTIONS, *BATCH],
        "speculative": [*OPTIONS, *BATCH, *speculative],
        "limited": [*OPTIONS, "--max_new_tokens", "12"],  # one request at a time, at most 12 tokens
    }
    started = litgpt_server.serving(
        *((checkpoints["target"], options) for options in configurations.values()), log_dir=checkpoints["root"]
    )
    with started as servers:
        yield dict(zip(configurations, servers))


@pytest.fixture(scope="module")
def target(checkpoints):
    llm = LLM.load(checkpoints["target"], distribute=None)
    llm.distribute(accelerator="cpu", precision="32-true")  # as the servers run it
    return llm


def chat(server, content: str, **fields):
    messages = [{"role": "user", "content": content}]
    return client(server).chat.completions.create(model="tiny", messages=messages, **{"temperature": 0, **fields})


def complete(server, prompt, **fields):
    return client(server).completions.create(model="tiny", prompt=prompt, **{"temperature": 0, **fields})


def model_logprobs(target: LLM, prompt: str, answer: list[int]) -> torch.Tensor:
    """The log-probabilities that the model gives at each position of `answer` after `prompt`, all in one pass."""
    prompt_ids = target.preprocessor.encode(prompt)
    text = torch.cat([prompt_ids, torch.tensor(answer, dtype=prompt_ids.dtype)]).view(1, -1)
    with torch.inference_mode():
        logits = target.model(text)[0, prompt_ids.size(0) - 1 : -1]
    return torch.log_softmax(logits.float(), dim=-1)


def test_models_lists_the_served_model(servers, checkpoints):
    (model,) = client(servers["plain"]).models.list().data
    assert model.id == str(checkpoints["target"]) and model.owned_by == "litgpt"
    answer = client(servers["plain"]).chat.completions.create(
        model=model.id, messages=[{"role": "user", "content": PROMPTS[0]}], temperature=0, max_tokens=4
    )
    assert answer.model == model.id and answer.usage.completion_tokens == 4


def test_completions_continue_the_prompt_as_chat_continues_its_rendering(servers):
    """The chat template renders a message as its text and a space: a completion of that text is the chat's answer,
    alone and in a list of prompts, streamed or not, with speculative decoding or without."""
    for name in ("plain", "speculative"):
        chats = [chat(servers[name], prompt, max_tokens=12) for prompt in PROMPTS]
        texts = [answer.choices[0].message.content for answer in chats]
        assert all(len(text.split()) >= 6 for text in texts)
        completion = complete(servers[name], PROMPTS[0] + " ", max_tokens=12)
        assert completion.object == "text_completion" and completion.choices[0].text == texts[0]
        assert completion.choices[0].finish_reason == "length" and completion.usage == chats[0].usage

        both = complete(servers[name], [prompt + " " for prompt in PROMPTS], max_tokens=12)
        assert [(choice.index, choice.text) for choice in both.choices] == [(0, texts[0]), (1, texts[1])]
        assert both.usage.prompt_tokens == sum(answer.usage.prompt_tokens for answer in chats)

        chunks = list(complete(servers[name], PROMPTS[1] + " ", max_tokens=12, stream=True))
        assert "".join(chunk.choices[0].text for chunk in chunks if chunk.choices) == texts[1]
        assert chunks[-1].choices[0].finish_reason == "length" and chunks[-1].usage.completion_tokens == 12


def test_logprobs_are_the_models_own_with_and_without_speculative_decoding(servers, target):
    answers = {}
    for name in ("plain", "speculative"):
        answer = chat(servers[name], PROMPTS[0], max_tokens=16, logprobs=True, top_logprobs=3)
        streamed = list(chat(servers[name], PROMPTS[0], max_tokens=16, logprobs=True, top_logprobs=3, stream=True))
        in_chunks = [
            e
            for chunk in streamed
            if chunk.choices and chunk.choices[0].logprobs
            for e in chunk.choices[0].logprobs.content
        ]
        assert [entry.model_dump() for entry in in_chunks] == [
            e.model_dump() for e in answer.choices[0].logprobs.content
        ]
        answers[name] = answer
    assert "proposed tokens accepted" in servers["speculative"].log()
    content = answers["plain"].choices[0].message.content
    assert answers["speculative"].choices[0].message.content == content
    entries = {name: answer.choices[0].logprobs.content for name, answer in answers.items()}
    assert len(entries["plain"]) == answers["plain"].usage.completion_tokens == 16
    assert [entry.token for entry in entries["plain"]] == content.split()  # a word-level tokenizer's words

    answer_ids = target.preprocessor.encode(content).tolist()
    assert len(answer_ids) == 16
    expected = model_logprobs(target, PROMPTS[0] + " ", answer_ids)
    for name in ("plain", "speculative"):
        for i, entry in enumerate(entries[name]):
            assert entry.logprob == pytest.approx(expected[i, answer_ids[i]].item(), abs=1e-4)
            assert [top.logprob for top in entry.top_logprobs] == pytest.approx(
                expected[i].topk(3).values.tolist(), abs=1e-4
            )
            assert entry.top_logprobs[0].token == entry.token  # greedy: the most probable token

    completion = complete(servers["speculative"], PROMPTS[0] + " ", max_tokens=16, logprobs=2)
    logprobs = completion.choices[0].logprobs
    assert logprobs.tokens == [entry.token for entry in entries["plain"]]
    assert logprobs.token_logprobs == pytest.approx([entry.logprob for entry in entries["plain"]], abs=1e-4)
    assert [len(top) for top in logprobs.top_logprobs] == [2] * 16 and logprobs.text_offset[0] == 0
    # none unless asked for
    assert chat(servers["plain"], PROMPTS[0], max_tokens=4).choices[0].logprobs is None


def test_n_samples_of_one_prompt(servers):
    seeded = {}
    for name in ("plain", "speculative"):
        greedy = chat(servers[name], PROMPTS[1], max_tokens=8)
        both = chat(servers[name], PROMPTS[1], max_tokens=8, n=2)
        assert [choice.message.content for choice in both.choices] == [greedy.choices[0].message.content] * 2
        assert both.usage.prompt_tokens == greedy.usage.prompt_tokens  # the prompt counted once
        assert both.usage.completion_tokens == 16

        sampled = chat(servers[name], PROMPTS[1], max_tokens=8, n=3, temperature=1.5, seed=7)
        texts = [choice.message.content for choice in sampled.choices]
        assert len(set(texts)) > 1  # each choice samples with its own random numbers
        again = chat(servers[name], PROMPTS[1], max_tokens=8, n=3, temperature=1.5, seed=7)
        assert [choice.message.content for choice in again.choices] == texts
        seeded[name] = texts

        chunks = list(chat(servers[name], PROMPTS[1], max_tokens=8, n=3, temperature=1.5, seed=7, stream=True))
        streamed = [
            "".join(c.choices[0].delta.content or "" for c in chunks[:-1] if c.choices[0].index == i) for i in range(3)
        ]
        assert streamed == texts
        assert [choice.finish_reason for choice in chunks[-1].choices] == ["length"] * 3
    # a seed draws the same sample whatever was proposed: with prompt lookup (over earlier answers too) and a draft
    assert seeded["speculative"] == seeded["plain"]


def test_max_tokens_up_to_the_context_unless_the_operator_limits_it(servers):
    answer = chat(servers["plain"], PROMPTS[0])  # no max_tokens: to the end of the context of 64 tokens
    assert answer.usage.total_tokens == 64 or answer.choices[0].finish_reason == "stop"
    assert answer.usage.completion_tokens > 24
    room = 64 - answer.usage.prompt_tokens
    with pytest.raises(openai.BadRequestError, match=rf"max_tokens must be between 1 and {room} \(the model's"):
        chat(servers["plain"], PROMPTS[0], max_tokens=room + 1)
    assert "An answer has at most what the context of 64 leaves" in servers["plain"].log()

    limited = servers["limited"]
    assert chat(limited, PROMPTS[0]).usage.completion_tokens == 12
    with pytest.raises(openai.BadRequestError, match=r"between 1 and 12 .*max_new_tokens is 12\), got 13"):
        complete(limited, PROMPTS[0], max_tokens=13)
    # logprobs are kept by continuous batching, which a server on one device always runs
    assert len(chat(limited, PROMPTS[0], logprobs=True).choices[0].logprobs.content) == 12
    assert "An answer has at most 12 tokens" in limited.log()


@pytest.mark.parametrize(
    ("fields", "param", "message"),
    [
        ({"prompt": [1, 2, 3]}, "prompt", "must be a string or a list of strings"),
        ({"echo": True}, "echo", "is not supported by this server"),
        ({"suffix": "x"}, "suffix", "is not supported by this server"),
        ({"best_of": 3}, "best_of", "must be n"),
        ({"logprobs": 21}, "logprobs", "less than or equal to 20"),
        ({"prompt": ["a"] * 9, "n": 2}, "n", "n times the prompts must be at most 16"),
        ({"max_tokens": 0}, "max_tokens", "max_tokens must be between 1 and"),
    ],
)
def test_completions_refuse_what_the_server_cannot_honour(servers, fields, param, message):
    body = {"model": "tiny", "prompt": PROMPTS[0], **fields}
    response = client(servers["plain"]).completions.with_raw_response
    with pytest.raises(openai.BadRequestError) as error:
        response.create(**body)
    assert error.value.body["param"] == param and message in error.value.body["message"]
