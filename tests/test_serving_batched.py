"""`litgpt serve --max_batch_size N` as users run it: real servers that batch the requests of concurrent clients
(LitServe's continuous batching loop), against a server that answers one request at a time, on tiny checkpoints.

At temperature 0 each client gets the answer it gets alone, whatever else is in the batch, in all three modes
(`/predict`, `--stream true`, `--openai_spec true`), with prompt lookup, a draft model or both, or compiled
(`--compile true`: the rounds compiled before the server is healthy, the answers the same); a seeded sample is
the same among other requests; a client that goes away frees its row; bad requests get their 4xx as without batching.
The real model's batched servers are in test_serving_real_model.py.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
import requests
import torch
from litgpt import GPT, Config
from litgpt.generate.kv_memory import KVMemory

from demo import tiny_checkpoints
from harness import litgpt_server

from . import litgpt_in_process
from .test_serving import COMMON, OPENAI, PROMPTS, TEMPLATE, chat, chat_stream, metrics

BATCH = ["--max_batch_size", "4", "--max_seq_length", "128"]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-batched")
    draft, target = tiny_checkpoints.build_pair(root)
    (target / "chat_template.jinja").write_text(TEMPLATE)
    configurations = {
        "one at a time": OPENAI,
        "batched": [*OPENAI, *BATCH],
        "batched lookup": [*OPENAI, *BATCH, "--prompt_lookup", "true"],
        "batched draft": [*OPENAI, *BATCH, "--draft_model", str(draft), "--speculative_k", "auto"],
        "batched lookup draft": [*OPENAI, *BATCH, "--prompt_lookup", "true", "--draft_model", str(draft)],
        "batched lookup compiled": [*OPENAI, *BATCH, "--prompt_lookup", "true", "--compile", "true"],
        "predict": [*COMMON, "--temperature", "0"],
        "predict batched": [*COMMON, "--temperature", "0", *BATCH],
        "stream batched": [*COMMON, "--temperature", "0", "--stream", "true", *BATCH],
        # KV cache memory for one row of up to 80 tokens (rows of 48 tokens or more take steps of 16), not for two
        "batched in little memory": [*OPENAI, *BATCH, "--kv_cache_memory", str(kv_cache_bytes(target, 80))],
    }
    with litgpt_server.serving(*((target, options) for options in configurations.values()), log_dir=root) as started:
        yield dict(zip(configurations, started))


def kv_cache_bytes(checkpoint_dir, tokens: int) -> int:
    """The bytes of a KV cache of one row of `tokens` tokens of the checkpoint's model, in float32, by LitGPT's rule."""
    with torch.device("meta"):
        model = GPT(Config.from_file(checkpoint_dir / "model_config.yaml"))
    return KVMemory(model, tokens).bytes(1, tokens)


def answer(server, job: tuple[str, bool, dict]) -> tuple[str, str]:
    """The text of the answer to one chat request, streamed or not, and its finish_reason."""
    prompt, stream, fields = job
    if stream:
        pieces, chunks = chat_stream(server, prompt, **fields)
        return "".join(pieces), chunks[-1].choices[0].finish_reason
    response = chat(server, prompt, **fields)
    return response.choices[0].message.content, response.choices[0].finish_reason


@pytest.mark.parametrize(
    "name", ["batched", "batched lookup", "batched draft", "batched lookup draft", "batched lookup compiled"]
)
def test_eight_concurrent_clients_with_mixed_streaming_each_get_their_own_answer(servers, name):
    first = answer(servers["one at a time"], (PROMPTS[1], False, {"temperature": 0}))[0]
    fields = [
        {"temperature": 0},
        {"temperature": 0, "max_tokens": 5},
        {"temperature": 0, "stop": first.split()[3]},  # a stop string that the answer meets
        {"temperature": 0, "max_tokens": 1},
    ]
    jobs = [(PROMPTS[i % 3], i % 2 == 0, fields[i % 4]) for i in range(8)]
    expected = [answer(servers["one at a time"], job) for job in jobs]
    assert {reason for _, reason in expected} == {"stop", "length"}
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        assert list(pool.map(lambda job: answer(servers[name], job), jobs)) == expected
    after = metrics(servers[name])
    assert after["litgpt:num_requests_running"] == after["litgpt:num_requests_waiting"] == 0
    assert sum(value for key, value in after.items() if key.startswith("litgpt:request_success_total")) >= 8
    assert "Continuous batching: up to 4 requests at once, of up to 128 tokens each" in servers[name].log()
    assert ("Compiled the model's rounds in" in servers[name].log()) == name.endswith("compiled")


def test_a_seeded_sample_is_the_same_among_other_requests(servers):
    server = servers["batched"]
    seeded = (PROMPTS[0], False, {"temperature": 1.5, "seed": 7})
    alone = answer(server, seeded)
    others = [(PROMPTS[1], True, {"temperature": 1.5})] * 3
    with ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(lambda job: answer(server, job), [seeded, *others]))[0] == alone
    assert answer(server, (PROMPTS[0], False, {"temperature": 1.5, "seed": 8})) != alone


def test_clients_that_drop_their_streams_free_their_rows(servers):
    """Each dropped request leaves its row (as "abort", or complete if it ended before the server noticed)."""
    server = servers["batched"]
    before = metrics(server)
    expected = answer(servers["one at a time"], (PROMPTS[2], False, {"temperature": 0}))
    for _ in range(4):  # as many as the batch has rows
        stream = chat(server, PROMPTS[0], temperature=0, stream=True, max_tokens=24)  # the server's most
        next(iter(stream))
        stream.close()
    with ThreadPoolExecutor(max_workers=4) as pool:
        jobs = [(PROMPTS[2], i % 2 == 0, {"temperature": 0}) for i in range(4)]
        assert list(pool.map(lambda job: answer(server, job), jobs)) == [expected] * 4
    after = metrics(server)
    answered = [key for key in after if key.startswith("litgpt:request_success_total")]
    assert sum(after[key] - before.get(key, 0) for key in answered) == 8
    assert after["litgpt:num_requests_running"] == after["litgpt:num_requests_waiting"] == 0


def test_predict_answers_and_streams_as_without_batching(servers):
    for prompt in PROMPTS:
        expected = requests.post(f"{servers['predict'].url}/predict", json={"prompt": prompt}, timeout=120).json()
        batched = requests.post(f"{servers['predict batched'].url}/predict", json={"prompt": prompt}, timeout=120)
        assert batched.headers["content-type"] == "application/json" and batched.json() == expected
        with requests.post(
            f"{servers['stream batched'].url}/predict", json={"prompt": prompt}, stream=True, timeout=120
        ) as streamed:
            pieces = [json.loads(line)["output"] for line in streamed.iter_lines() if line]
        assert len(pieces) > 1 and "".join(pieces) == expected["output"]
    for name in ("predict", "predict batched", "stream batched"):
        bad = (({"prompt": 3}, "prompt: must be a string"), ({"prompt": "grass " * 2000}, "prompt: must have"))
        for body, message in bad:
            response = requests.post(f"{servers[name].url}/predict", json=body, timeout=60)
            assert response.status_code == 400 and response.json()["detail"].startswith(message), (name, response.text)


def test_requests_wait_for_kv_cache_memory_and_one_that_can_never_fit_gets_a_400(servers):
    """With memory for one request at a time, twelve concurrent clients get their answers one after the other (the
    others counted as waiting in /metrics, which is read while they are answered: twelve answers of the tiny model
    last long enough to be seen also on a loaded machine); a request whose tokens can never fit is refused, naming the
    flag."""
    server = servers["batched in little memory"]
    assert "40.0 KiB of KV cache (512 B per token): one request of up to 80 tokens, or 4 of up to 16" in server.log()
    # each may hold its prompt, 24 new tokens and the 16 tokens a round may propose: more than 40 tokens
    jobs = [(PROMPTS[i % 3], i % 2 == 0, {"temperature": 0, "max_tokens": 24}) for i in range(12)]
    expected = [answer(servers["one at a time"], job) for job in jobs]
    seen, done, watching_started = [], threading.Event(), threading.Event()
    together = threading.Barrier(len(jobs), timeout=60)

    def watch():
        while not done.is_set():
            seen.append(metrics(server))
            watching_started.set()

    def send(job):
        # once /metrics is watched, all at once
        assert watching_started.wait(60)
        together.wait()
        return answer(server, job)

    with ThreadPoolExecutor(max_workers=len(jobs) + 1) as pool:
        watching = pool.submit(watch)
        assert list(pool.map(send, jobs)) == expected
        done.set()
        watching.result()
    assert max(m["litgpt:num_requests_waiting"] for m in seen) >= 1
    assert max(m["litgpt:num_requests_running"] for m in seen) == 1
    assert 0 < max(m["litgpt:kv_cache_usage_perc"] for m in seen) <= 1
    assert metrics(server)["litgpt:kv_cache_usage_perc"] == 0  # given back once all are answered
    with pytest.raises(openai.BadRequestError, match="more than kv_cache_memory 40.0 KiB holds: 80 tokens"):
        chat(server, "grass " * 50, max_tokens=24)


def test_start_up_refuses_bad_batching_options(tmp_path):
    _, target = tiny_checkpoints.build_pair(tmp_path)
    for args, message in (
        (["--max_batch_size", "0"], "max_batch_size must be an integer >= 1, got 0"),
        (["--max_batch_size", "2", "--max_seq_length", "1"], "max_seq_length must be an integer of at least 2"),
        (["--kv_cache_memory", "lots"], "kv_cache_memory must be a positive number of bytes or a size such as"),
    ):
        output = litgpt_in_process.refused_at_start(str(target), *args)
        assert message in output, output[-2000:]
