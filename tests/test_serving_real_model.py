"""`litgpt serve --openai_spec true` on the real SmolLM2-135M-Instruct, driven by the `openai` client.

At temperature 0 the endpoint answers what `LLM.generate` answers for the same single user message (its chat
template and the checkpoint's prompt style give the same token ids): one request at a time without proposals, and
with prompt lookup on a server that batches 8 requests of the whole context, and with a draft model of the model's
first four blocks on one that batches 4 of 512 tokens, to one client and to concurrent ones (every server runs the one
engine, a request alone as a batch of one); streamed pieces add up to the answer, in whole characters. Idle, the
server of 8 requests takes no more memory than the one of 1: its KV caches take memory as requests come.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
from litgpt import LLM

from harness import litgpt_server
from tools import smollm2

MAX_TOKENS = 48
PROMPTS = [
    *smollm2.PROMPTS[:4],  # the fourth answers in French: multi-byte characters
    "Add a comment above every line:\ndef area(r):\n    pi = 3.14159\n    return pi * r * r",
]
OPTIONS = ["--openai_spec", "true", "--accelerator", "cpu", "--precision", "32-true", "--timeout", "600"]
BATCH = ["--max_batch_size", "4", "--max_seq_length", "512"]


@pytest.fixture(scope="module")
def servers(checkpoint_dir, draft_dir, tmp_path_factory):
    """The model (conftest.py's `checkpoint_dir`) served alone, and batched with lookup and with its 4-block draft."""
    configurations = {
        "alone": OPTIONS,
        # 8 requests of the model's whole context, 8,192 tokens (lookup takes no memory of its own)
        "batched lookup": [*OPTIONS, "--max_batch_size", "8", "--prompt_lookup", "true"],
        "batched draft": [*OPTIONS, *BATCH, "--draft_model", str(draft_dir), "--speculative_k", "auto"],
    }
    log_dir = tmp_path_factory.mktemp("smollm2-serving")
    with litgpt_server.serving(
        *((checkpoint_dir, options) for options in configurations.values()), log_dir=log_dir
    ) as started:
        for server in started:
            server.idle_rss_mib = litgpt_server.rss_mib(server)  # before any request
        yield dict(zip(configurations, started))


@pytest.fixture(scope="module")
def expected(checkpoint_dir):
    """What the Python API answers at temperature 0, and the prompts' token counts."""
    llm = LLM.load(str(checkpoint_dir), distribute=None)
    llm.distribute(accelerator="cpu", precision="32-true")
    return {
        prompt: (llm.generate(prompt, temperature=0, max_new_tokens=MAX_TOKENS), llm._text_to_token_ids(prompt).size(0))
        for prompt in PROMPTS
    }


def chat(server, prompt: str, **fields):
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="not needed", max_retries=0)
    messages = [{"role": "user", "content": prompt}]
    fields = {"max_tokens": MAX_TOKENS, **fields}
    return client.chat.completions.create(model="SmolLM2-135M-Instruct", messages=messages, **fields)


def streamed(server, prompt: str) -> list[str]:
    chunks = chat(server, prompt, temperature=0, stream=True)
    return [chunk.choices[0].delta.content for chunk in chunks if chunk.choices and chunk.choices[0].delta.content]


@pytest.mark.parametrize("name", ["alone", "batched lookup", "batched draft"])
def test_the_openai_endpoint_answers_what_llm_generate_answers(servers, expected, name):
    finish_reasons = set()
    for prompt, (text, prompt_tokens) in expected.items():
        answer = chat(servers[name], prompt, temperature=0)
        assert answer.choices[0].message.content == text, prompt
        assert answer.usage.prompt_tokens == prompt_tokens
        finish_reason = "length" if answer.usage.completion_tokens == MAX_TOKENS else "stop"
        assert answer.choices[0].finish_reason == finish_reason
        finish_reasons.add(finish_reason)
        pieces = streamed(servers[name], prompt)
        assert "".join(pieces) == text
        assert not any("\ufffd" in piece for piece in pieces)
    assert "stop" in finish_reasons  # answers that end with <|im_end|>
    short = chat(servers[name], PROMPTS[0], temperature=0, max_tokens=4)
    assert (short.choices[0].finish_reason, short.usage.completion_tokens) == ("length", 4)
    assert expected[PROMPTS[0]][0].startswith(short.choices[0].message.content)
    assert any(not text.isascii() for text, _ in expected.values())
    if "lookup" in name or "draft" in name:
        assert "proposed tokens accepted" in servers[name].log()


def test_a_server_that_batches_8_requests_of_the_whole_context_takes_no_more_memory_idle_than_one_of_1(servers):
    """The KV caches take memory as requests come (8 rows of 8,192 tokens took 2.9 GiB more at start before)."""
    alone, batched = servers["alone"], servers["batched lookup"]
    assert batched.idle_rss_mib < alone.idle_rss_mib + 100, (batched.idle_rss_mib, alone.idle_rss_mib)
    # by default what 8 rows of the whole context take, at most half the memory free (on this machine, all of it)
    assert re.search(
        r"in up to [\d.]+ GiB of KV cache \(45.0 KiB per token\): one request of up to 8,192", batched.log()
    )


@pytest.mark.parametrize("name", ["batched lookup", "batched draft"])
def test_four_concurrent_clients_each_get_their_answer(servers, expected, name):
    prompts = PROMPTS[1:5]

    def answer(job):
        prompt, stream = job
        if stream:
            return "".join(streamed(servers[name], prompt))
        return chat(servers[name], prompt, temperature=0).choices[0].message.content

    jobs = [(prompt, i % 2 == 0) for i, prompt in enumerate(prompts)]
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        assert list(pool.map(answer, jobs)) == [expected[prompt][0] for prompt in prompts]


def test_text_parts_a_developer_message_and_an_assistant_turn_without_content_are_read_as_openai_documents(servers):
    """As SmolLM2's chat template reads them: parts joined with newlines, the developer's message as the system's,
    an assistant's turn without content as an empty one."""
    as_strings = [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Name a colour.\nAnd a fruit."},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "Now a number."},
    ]
    as_sent = [
        {"role": "developer", "content": [{"type": "text", "text": "Answer in one word."}]},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Name a colour."}, {"type": "text", "text": "And a fruit."}],
        },
        {"role": "assistant", "content": None},
        {"role": "user", "content": "Now a number."},
    ]
    client = openai.OpenAI(base_url=f"{servers['alone'].url}/v1", api_key="not needed", max_retries=0)
    answers = [
        client.chat.completions.create(model="SmolLM2", messages=messages, temperature=0, max_tokens=16)
        for messages in (as_strings, as_sent)
    ]
    assert answers[0].choices[0].message.content == answers[1].choices[0].message.content
    assert answers[0].usage.prompt_tokens == answers[1].usage.prompt_tokens > 30
