"""`litgpt serve` as users run it: real servers (subprocesses on free ports), driven by the `openai` client and by
plain HTTP, with and without prompt lookup and a draft model, on tiny checkpoints.

The servers of a module start together (their start-up is mostly imports) and are stopped with their process groups
when the module ends, also when a test fails (harness/litgpt_server.py). The real model's servers are in
test_serving_real_model.py, bad and hostile requests in test_serving_hostile.py.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
import requests
from litgpt.tokenizer import Tokenizer

from demo import tiny_checkpoints
from harness import litgpt_server

from . import litgpt_in_process

# the tiny models' chat template: the messages' text, which is also what `LLM.generate` reads for one message
TEMPLATE = "{% for message in messages %}{{ message['content'] }} {% endfor %}"
COMMON = ["--accelerator", "cpu", "--precision", "32-true", "--max_new_tokens", "24", "--timeout", "300"]
OPENAI = ["--openai_spec", "true", "--temperature", "0", *COMMON]
PROMPTS = [
    "the llama eats grass and the alpaca eats hay",
    "old on sings runs walks mountain green grass",
    "the llama eats grass the llama eats grass the llama eats grass the llama",
]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-serving")
    draft, target = tiny_checkpoints.build_pair(root)
    (target / "chat_template.jinja").write_text(TEMPLATE)
    return {"root": root, "draft": draft, "target": target}


@pytest.fixture(scope="module")
def servers(checkpoints):
    draft, target = str(checkpoints["draft"]), checkpoints["target"]
    lookup, with_draft = ["--prompt_lookup", "true"], ["--draft_model", draft]
    configurations = {
        "alone": OPENAI,
        "lookup": [*OPENAI, *lookup],
        "draft": [*OPENAI, *with_draft, "--speculative_k", "auto"],
        "predict": [*COMMON, "--temperature", "0"],
        "predict speculative": [*COMMON, "--temperature", "0", *lookup, *with_draft, "--speculative_k", "2"],
        "stream speculative": [*COMMON, "--temperature", "0", "--stream", "true", *lookup, *with_draft],
    }
    with litgpt_server.serving(
        *((target, options) for options in configurations.values()), log_dir=checkpoints["root"]
    ) as started:
        yield dict(zip(configurations, started))


def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="not needed", max_retries=0)


def chat(server, content: str, **fields):
    messages = [{"role": "user", "content": content}]
    return client(server).chat.completions.create(model="tiny", messages=messages, **fields)


def chat_stream(server, content: str, **fields) -> tuple[list[str], list]:
    """The streamed pieces of text, and all chunks."""
    chunks = list(chat(server, content, stream=True, **fields))
    pieces = [chunk.choices[0].delta.content for chunk in chunks if chunk.choices and chunk.choices[0].delta.content]
    return pieces, chunks


def test_greedy_answers_are_the_same_with_prompt_lookup_and_a_draft_model(servers):
    for prompt in PROMPTS:
        answers = {name: chat(servers[name], prompt, temperature=0) for name in ("alone", "lookup", "draft")}
        texts = {name: answer.choices[0].message.content for name, answer in answers.items()}
        assert len(set(texts.values())) == 1, texts
        assert len(texts["alone"].split()) >= 10
        usage = {name: (answer.usage.prompt_tokens, answer.usage.completion_tokens) for name, answer in answers.items()}
        assert len(set(usage.values())) == 1, usage
        for name in answers:
            pieces, chunks = chat_stream(servers[name], prompt, temperature=0)
            assert "".join(pieces) == texts["alone"], name
            assert chunks[-1].choices[0].finish_reason == answers[name].choices[0].finish_reason
    # the rounds proposed tokens, from the prompt and from the draft model
    for name in ("lookup", "draft"):
        log = servers[name].log()
        assert re.search(r"Request: .* [1-9]\d* of \d+ proposed tokens accepted", log), log[-2000:]


def test_predict_answers_and_streams_are_the_same_with_speculative_decoding(servers):
    for prompt in PROMPTS:
        outputs = [
            requests.post(f"{servers[name].url}/predict", json={"prompt": prompt}, timeout=120).json()["output"]
            for name in ("predict", "predict speculative")
        ]
        assert outputs[0] == outputs[1] and len(outputs[0].split()) >= 10
        with requests.post(
            f"{servers['stream speculative'].url}/predict", json={"prompt": prompt}, stream=True, timeout=120
        ) as response:
            pieces = [json.loads(line)["output"] for line in response.iter_lines() if line]
        assert "".join(pieces) == outputs[0]
        assert len(pieces) > 1


def test_request_fields_are_honoured(servers, checkpoints):
    alone = servers["alone"]
    prompt = PROMPTS[0]
    greedy = chat(alone, prompt, temperature=0)
    text = greedy.choices[0].message.content
    # left out: the server's --temperature 0, not the 0.7 that LitServe's request model fills in
    assert chat(alone, prompt).choices[0].message.content == text
    assert chat(alone, prompt, top_p=0, temperature=1.0).choices[0].message.content == text
    sampled = {chat(alone, prompt, temperature=1.0).choices[0].message.content for _ in range(4)}
    assert len(sampled) > 1

    prompt_tokens = Tokenizer(checkpoints["target"]).encode(prompt).size(0)
    assert (greedy.usage.prompt_tokens, greedy.usage.completion_tokens) == (prompt_tokens, 24)
    assert greedy.usage.total_tokens == prompt_tokens + 24
    assert greedy.choices[0].finish_reason == "length"
    for fields, count in (({"max_tokens": 3}, 3), ({"max_completion_tokens": 5}, 5), ({"max_tokens": 24}, 24)):
        answer = chat(alone, prompt, temperature=0, **fields)
        assert answer.usage.completion_tokens == count and answer.choices[0].finish_reason == "length"
        assert text.startswith(answer.choices[0].message.content)
    # more than the server's --max_new_tokens is refused, naming both numbers, not answered with fewer tokens
    with pytest.raises(openai.BadRequestError, match=r"max_tokens must be between 1 and 24 .*max_new_tokens is 24"):
        chat(alone, prompt, temperature=0, max_tokens=25)

    # the answer ends before the first stop string, also when streaming
    words = text.split()
    stop = f" {words[4]} "
    expected = text[: text.index(stop)]
    for name in ("alone", "lookup"):
        answer = chat(servers[name], prompt, temperature=0, stop=[stop, "never in the text"])
        assert (answer.choices[0].message.content, answer.choices[0].finish_reason) == (expected, "stop")
        pieces, chunks = chat_stream(servers[name], prompt, temperature=0, stop=stop)
        assert "".join(pieces) == expected and chunks[-1].choices[0].finish_reason == "stop"


def test_concurrent_clients_each_get_their_own_answer(servers):
    expected = {prompt: chat(servers["alone"], prompt, temperature=0).choices[0].message.content for prompt in PROMPTS}
    jobs = [(prompt, stream) for prompt in PROMPTS for stream in (False, True)][:4] + [(PROMPTS[2], True)]

    def answer(job):
        prompt, stream = job
        if stream:
            return "".join(chat_stream(servers["lookup"], prompt, temperature=0)[0])
        return chat(servers["lookup"], prompt, temperature=0).choices[0].message.content

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        answers = list(pool.map(answer, jobs))
    assert answers == [expected[prompt] for prompt, _ in jobs]


def test_a_client_that_drops_a_stream_does_not_disturb_the_next_request(servers):
    server = servers["draft"]
    expected = chat(servers["alone"], PROMPTS[1], temperature=0).choices[0].message.content
    stream = chat(server, PROMPTS[0], temperature=0, stream=True, max_tokens=24)
    next(iter(stream))
    stream.close()
    assert chat(server, PROMPTS[1], temperature=0).choices[0].message.content == expected
    pieces, _ = chat_stream(server, PROMPTS[1], temperature=0)
    assert "".join(pieces) == expected


def metrics(server) -> dict[str, float]:
    text = requests.get(f"{server.url}/metrics", timeout=30).text
    return {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines() if not line.startswith("#")}


def test_metrics_count_the_requests_and_the_draft_tokens(servers):
    # one log line per request, with what the counters say
    line = (
        r"^Request: (\d+) prompt tokens, (\d+) new tokens in .* finish_reason (\w+)"
        r"(?:, (\d+) of (\d+) proposed tokens accepted \(\d+%\) in (\d+) rounds?)?$"
    )
    for name in ("alone", "lookup"):
        # a prompt that repeats itself: the lookup proposes, and the model accepts, unless the server measured that
        # proposing does not pay (a tiny model's round takes a millisecond: under load, its timings are noise), which
        # it tries again after a while: a few requests give it the chance
        for _ in range(5):
            before = metrics(servers[name])
            answer = chat(servers[name], PROMPTS[2], temperature=0, max_tokens=20)
            after = metrics(servers[name])
            increase = {key: after[key] - before.get(key, 0) for key in after}
            assert increase['litgpt:request_success_total{finished_reason="length"}'] == 1
            assert increase["litgpt:prompt_tokens_total"] == answer.usage.prompt_tokens
            assert increase["litgpt:generation_tokens_total"] == answer.usage.completion_tokens == 20
            drafts, proposed, accepted = (
                increase[f"litgpt:spec_decode_num_{kind}_total"]
                for kind in ("drafts", "draft_tokens", "accepted_tokens")
            )
            lines = re.findall(line, servers[name].log(), re.MULTILINE)
            assert lines[-1][:3] == (str(answer.usage.prompt_tokens), "20", "length")
            assert (accepted, proposed, drafts) == tuple(float(count or 0) for count in lines[-1][3:])
            requests_counted = sum(
                value for key, value in after.items() if key.startswith("litgpt:request_success_total")
            )
            assert requests_counted == len(lines)
            if name == "alone":
                assert drafts == proposed == accepted == 0
                break
            if drafts:
                assert drafts <= proposed and 0 < accepted <= proposed
                break
        else:
            pytest.fail("the lookup proposed no token in 5 requests of a prompt that repeats itself")


def test_start_up_errors_exit_before_the_port_opens(checkpoints, tmp_path):
    other_draft, _ = tiny_checkpoints.build_pair(tmp_path, draft_words=tiny_checkpoints.WORDS[:-1])
    for args, message in (
        ([str(tmp_path / "missing")], "is not a checkpoint directory"),
        ([str(checkpoints["target"]), "--draft_model", str(other_draft)], "must share a tokenizer"),
        ([str(checkpoints["target"]), "--draft_model", str(tmp_path / "missing")], "is not a checkpoint directory"),
        ([str(checkpoints["target"]), "--speculative_k", "0", "--prompt_lookup", "true"], "speculative_k must be"),
    ):
        output = litgpt_in_process.refused_at_start(*args)
        assert message in output, output[-2000:]
