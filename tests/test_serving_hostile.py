"""`litgpt serve --openai_spec true` used by strangers: every bad request a 4xx in the OpenAI API's format that names
the field, generated bodies never a 5xx nor a hang, bad requests among concurrent good ones change none of their
answers, a dropped stream ends its generation, memory stays where it was, no client proposed another's answers, and
the operator's settings (API key, interface, access token) hold; answering one request at a time, and with
continuous batching (`--max_batch_size 4`), where requests arrive while others generate in the same batch.

Two real servers for each, driven by plain HTTP and the `openai` client, both with prompt lookup over earlier
answers kept apart by salt, an API key, `--host 127.0.0.1` and an access token: one of a tiny checkpoint, which after
every kind of abuse still answers a greedy request as before, and one of the demo's Zen of Python model, whose
answers show what a salt keeps apart and last long enough for a dropped stream to be noticed. The cases and the
request strategy are in harness/hostile_requests.py, which benchmarks/serve_hostile.py sends at scale.
"""

from __future__ import annotations

import re
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import openai
import psutil
import pytest
import requests
from hypothesis import HealthCheck, given, settings

from demo import tiny_checkpoints, zen
from harness import hostile_requests, litgpt_server
from harness.hostile_requests import CASES, GOOD, PATH, post

from .conftest import ROOT

API_KEY = "key-" + uuid.uuid4().hex
ACCESS_TOKEN = "hf_" + uuid.uuid4().hex  # never to be printed
# the messages' text; a message "divide by zero" makes the template fail as a bug would, "refuse" as templates
# refuse conversations they cannot render
TEMPLATE = (
    "{% for message in messages %}{% if message['content'] == 'divide by zero' %}{{ 1 / 0 }}{% endif %}"
    "{% if message['content'] == 'refuse' %}{{ raise_exception('this conversation is refused') }}{% endif %}"
    "{{ message['content'] }} {% endfor %}"
)
OPTIONS = [
    *("--openai_spec", "true", "--accelerator", "cpu", "--precision", "32-true", "--temperature", "0"),
    *("--max_new_tokens", "200", "--timeout", "120", "--host", "127.0.0.1", "--access_token", ACCESS_TOKEN),
    *("--prompt_lookup", "true", "--lookup_cache_tokens", "65536"),
]


@pytest.fixture(scope="module", params=["one at a time", "batched"])
def servers(request, tmp_path_factory):
    """The tiny checkpoint's server, and one of the demo's Zen of Python model, whose answers prompt lookup proposes
    poorly from the prompt alone and well from an earlier answer to the same prompt; each answering one request at a
    time, or the requests of concurrent clients together (`--max_batch_size 4`)."""
    root = tmp_path_factory.mktemp("hostile")
    _, target = tiny_checkpoints.build_pair(root)
    (target / "chat_template.jinja").write_text(TEMPLATE)
    zen_target = shutil.copytree(zen.build_zen_pair(ROOT / "build" / "demo")[1], root / "zen")
    (zen_target / "chat_template.jinja").write_text("{% for message in messages %}{{ message['content'] }}{% endfor %}")
    options = [*OPTIONS, "--max_batch_size", "4"] if request.param == "batched" else OPTIONS
    configurations = [(target, options), (zen_target, [*options, "--max_new_tokens", "100"])]
    with litgpt_server.serving(*configurations, log_dir=root, env={"LIT_SERVER_API_KEY": API_KEY}) as started:
        yield started


@pytest.fixture(scope="module")
def server(servers):
    return servers[0]


@pytest.fixture(scope="module")
def greedy(server):
    """The greedy answer to GOOD before anything else was sent, and a check that the server still gives it."""
    expected = answer(server, GOOD)
    assert len(expected.split()) >= 8

    def still_answered() -> None:
        assert answer(server, GOOD) == expected

    return still_answered


def answer(server, body: dict) -> str:
    response, _ = post(server.url + PATH, body, headers=server.headers)
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"]


def client(server) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{server.url}/v1", api_key="unused", default_headers=server.headers, max_retries=0, timeout=60
    )


def metrics(server) -> dict[str, float]:
    text = requests.get(f"{server.url}/metrics", headers=server.headers, timeout=30).text
    return {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines() if not line.startswith("#")}


def increase(before: dict[str, float], after: dict[str, float], name: str) -> float:
    return after[f"litgpt:{name}"] - before.get(f"litgpt:{name}", 0)


def test_every_bad_request_gets_a_4xx_in_the_openai_format_and_changes_nothing(server, greedy):
    for case in hostile_requests.CASES:
        response, seconds = post(server.url + case.path, case.body, case.method, headers=server.headers)
        assert response.status_code == case.status, (case.name, response.text[:300])
        assert seconds < 30, case.name
        if case.status >= 400:
            error = hostile_requests.openai_error(response)
            assert error is not None, (case.name, response.text[:300])
            assert error["type"] == "invalid_request_error"
            if case.param:
                assert error["param"] == case.param, (case.name, error)
        greedy()


def test_openai_clients_show_the_message_streaming_or_not(server, greedy):
    messages = GOOD["messages"]
    for fields, message in (
        ({"n": 0}, "n: Input should be greater than or equal to 1"),
        ({"temperature": 3}, "temperature: Input should be less than or equal to 2"),
        ({"max_tokens": 10**6}, "max_tokens must be between 1 and"),
        ({"stop": ["x"] * 5}, "stop: must be a string or a list of at most 4 strings"),
        ({"presence_penalty": 0.5}, "presence_penalty: is not supported by this server"),
    ):
        for stream in (False, True):
            with pytest.raises(openai.BadRequestError, match=re.escape(message)) as error:
                client(server).chat.completions.create(model="tiny", messages=messages, stream=stream, **fields)
            assert error.value.status_code == 400
    # content as text parts, as frameworks send it: joined with newlines
    parts = [{"type": "text", "text": "the llama eats"}, {"type": "text", "text": "grass"}]
    as_parts = client(server).chat.completions.create(model="tiny", messages=[{"role": "user", "content": parts}])
    assert as_parts.choices[0].message.content == answer(
        server, {**GOOD, "messages": [{"role": "user", "content": "the llama eats\ngrass"}]}
    )
    greedy()


def test_an_error_in_a_generation_fails_that_request_only(server, greedy):
    for content, status, kind in (("divide by zero", 500, "server_error"), ("refuse", 400, "invalid_request_error")):
        for stream in (False, True):
            body = {**GOOD, "messages": [{"role": "user", "content": content}], "stream": stream}
            response, _ = post(server.url + PATH, body, headers=server.headers)
            error = hostile_requests.openai_error(response)
            assert response.status_code == status and error and error["type"] == kind, response.text
            greedy()
    assert "ZeroDivisionError" in server.log()  # for the operator, not for the client:
    assert "ZeroDivision" not in response.text and "this conversation is refused" in error["message"]


def test_bad_requests_among_concurrent_clients_change_no_other_answer(server, greedy):
    """The bad requests of issue 28 and those that fail in the worker (a conversation that its template refuses or
    fails on) sent by 4 clients at once, beside 4 clients that ask for a long greedy answer again, streaming or not:
    each bad request gets its status, and each good one the answer it gets alone (with batching, bad requests arrive
    while good ones generate in the batch)."""
    fields = {"messages": GOOD["messages"], "temperature": 0, "max_tokens": 200}
    expected = answer(server, fields)
    failing = [
        hostile_requests.Case(content, {**GOOD, "messages": [{"role": "user", "content": content}]}, status)
        for content, status in (("divide by zero", 500), ("refuse", 400))
    ]
    cases = (CASES + failing) * 2

    def bad(case: hostile_requests.Case) -> tuple[str, int]:
        response, _ = post(server.url + case.path, case.body, case.method, headers=server.headers)
        return case.name, response.status_code

    def good(stream: bool) -> str:
        completion = client(server).chat.completions.create(model="tiny", stream=stream, **fields)
        if not stream:
            return completion.choices[0].message.content
        return "".join(chunk.choices[0].delta.content or "" for chunk in completion if chunk.choices)

    with ThreadPoolExecutor(8) as pool:
        sent = [(pool.submit(good, False), pool.submit(bad, case), pool.submit(good, True)) for case in cases]
        assert [b.result() for _, b, _ in sent] == [(case.name, case.status) for case in cases]
        assert [(g.result(), s.result()) for g, _, s in sent] == [(expected, expected)] * len(cases)
    greedy()


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,  # the same bodies in every run; benchmarks/serve_hostile.py sends new ones
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=hostile_requests.bodies)
def test_generated_requests_never_get_a_5xx_nor_hang(server, body):
    response, seconds = post(server.url + PATH, body, headers=server.headers, timeout=60)
    assert response.status_code < 500, response.text[:500]
    assert seconds < 30
    if response.status_code >= 400:
        assert hostile_requests.openai_error(response) is not None, response.text[:500]
    elif isinstance(body, dict) and body.get("stream") is True:
        assert response.text.rstrip().endswith("data: [DONE]")
    else:
        assert response.json()["choices"][0]["message"]["role"] == "assistant"


def test_the_greedy_answer_is_the_same_after_the_generated_requests(server, greedy):
    greedy()


def test_a_dropped_stream_ends_its_generation(servers):
    """A stream whose client goes away after the first event ends its generation within a round, counted as aborted
    and logged. The Zen model's answer takes about a hundred rounds (a new salt each time: the prompt alone proposes
    it poorly), long enough for the server to notice; a busy machine can still let a generation end before the HTTP
    process noticed that its client went away, so a drop is tried up to five times."""
    server = servers[1]
    before = metrics(server)
    for _ in range(5):
        messages = [{"role": "user", "content": "Beautiful is better than"}]
        body = {**GOOD, "messages": messages, "max_tokens": 100, "stream": True, "cache_salt": uuid.uuid4().hex}
        logged = len(logged_requests(server))
        with requests.post(server.url + PATH, json=body, headers=server.headers, stream=True, timeout=60) as response:
            assert response.status_code == 200
            next(response.iter_lines())  # the first event, and then the client goes away
        lines = logged_requests(server, more_than=logged)
        assert len(lines) > logged, "the server logged no end of the dropped stream's generation"
        ended = lines[-1]
        if re.search(r"finish_reason abort\b", ended):
            break
    else:
        pytest.fail(f"none of 5 dropped streams was aborted; the last: {ended}")
    assert int(re.search(r"(\d+) new tokens", ended).group(1)) < 100, ended
    assert increase(before, metrics(server), 'request_success_total{finished_reason="abort"}') == 1


def logged_requests(server, more_than: int = -1, timeout: float = 30) -> list[str]:
    """The lines that the server logged for the requests it answered, once there are more than `more_than`."""
    deadline = time.monotonic() + timeout
    while True:
        lines = re.findall(r"^Request: .*$", server.log(), re.M)
        if len(lines) > more_than or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def test_a_salt_keeps_a_clients_earlier_answers_from_the_others(servers):
    """The lookup proposes from earlier answers to requests with the same salt only: the first client's second
    request is proposed its first answer, and accepts all of what it is proposed, while a second client asking the
    same is proposed what the first was proposed with nothing in the cache, and accepts as little of it. How many
    tokens a round proposes is chosen from the rounds' timings (`speculative_k="auto"`), so the rates are compared,
    not the counts: a slow machine proposes fewer."""
    server = servers[1]
    rates, answers = [], []
    alice, bob = (f"{name}-{uuid.uuid4().hex}" for name in ("alice", "bob"))
    for salt in (alice, alice, bob):
        messages = [{"role": "user", "content": "Beautiful is better than"}]
        before = metrics(server)
        answers.append(answer(server, {"messages": messages, "max_tokens": 100, "cache_salt": salt}))
        after = metrics(server)
        proposed = increase(before, after, "spec_decode_num_draft_tokens_total")
        accepted = increase(before, after, "spec_decode_num_accepted_tokens_total")
        assert proposed > 0
        rates.append(accepted / proposed)
    assert len(set(answers)) == 1 and len(answers[0]) > 200
    first, again, other = rates
    assert again >= 0.9 > 0.6 > max(first, other), rates


def test_memory_stays_where_it_was_after_200_requests(server):
    def requests_(count: int, offset: int) -> None:
        for i in range(offset, offset + count):
            prompt = f"{tiny_checkpoints.WORDS[i % 40]} {tiny_checkpoints.WORDS[(7 * i) % 50]} eats"
            body = {**GOOD, "messages": [{"role": "user", "content": prompt}], "max_tokens": 8, "stream": i % 2 == 0}
            body["cache_salt"] = f"client-{i}"
            response, _ = post(server.url + PATH, body, headers=server.headers)
            assert response.status_code == 200

    requests_(10, 0)
    start = litgpt_server.rss_mib(server)
    assert start > 100  # MiB: the server's processes, with torch loaded
    requests_(200, 10)
    grown = litgpt_server.rss_mib(server) - start
    print(f"RSS grew by {grown:.1f} MiB over 200 requests")
    assert grown < 25


def test_the_operators_settings_hold(server):
    for method, path in (("GET", "/metrics"), ("GET", "/health"), ("POST", PATH)):
        response, _ = post(f"{server.url}{path}", GOOD, method)  # without the API key
        assert response.status_code in (401, 403) and hostile_requests.openai_error(response), path
    assert requests.get(f"{server.url}/metrics", headers=server.headers, timeout=30).status_code == 200
    # --host 127.0.0.1: it listens on this machine's loopback interface only
    group = psutil.Process(server.process.pid)
    listening = {
        connection.laddr.ip
        for process in [group, *group.children(recursive=True)]
        for connection in process.net_connections(kind="inet")
        if connection.status == psutil.CONN_LISTEN
    }
    assert listening == {"127.0.0.1"}
    printed = server.log().split("\n", 1)[1]  # what the server printed, after the command line that started it
    assert ACCESS_TOKEN not in printed and "'access_token': '<hidden>'" in printed
