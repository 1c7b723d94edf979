"""Requests that a stranger may send to `litgpt serve --openai_spec true`, for the tests and the hostile-serving
benchmark: the cases of issue 28 (each with the status the server must answer) and a hypothesis strategy that
generates bodies of random JSON, random field types and values, and random message parts.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import requests
from hypothesis import strategies as st

PATH = "/v1/chat/completions"
GOOD = {
    "model": "tiny",
    "messages": [{"role": "user", "content": "the llama eats grass"}],
    "temperature": 0,
    "max_tokens": 16,
}


@dataclass
class Case:
    name: str
    body: dict | bytes  # bytes are sent as they are
    status: int  # what the server must answer
    param: str | None = None  # the field a 400 must name
    method: str = "POST"
    path: str = PATH


def _with(**fields) -> dict:
    return {**GOOD, **fields}


def _message(content, role: str = "user") -> dict:
    return _with(messages=[{"role": role, "content": content}])


# the bad requests of issue 28, one class each, and the good requests that a server used to fail
CASES = [
    Case("n 0, streaming", _with(n=0, stream=True), 400, "n"),
    Case("n 0", _with(n=0), 400, "n"),
    Case("n 17 (at most 16)", _with(n=17), 400, "n"),
    Case("n null (the default, 1)", _with(n=None), 200),
    Case("model null", _with(model=None), 400, "model"),
    Case("messages empty", _with(messages=[]), 400, "messages"),
    Case("messages missing", {"model": "tiny"}, 400, "messages"),
    Case("role unknown", _message("hi", role="robot"), 400, "messages[0].role"),
    Case(
        "content as text parts",
        _message([{"type": "text", "text": "the llama"}, {"type": "text", "text": "eats"}]),
        200,
    ),
    Case("content null, assistant", _with(messages=[*GOOD["messages"], {"role": "assistant", "content": None}]), 200),
    Case("content null, user", _message(None), 400, "messages[0].content"),
    Case(
        "content an image part",
        _message([{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]),
        400,
        "messages[0].content",
    ),
    Case("content a number", _message(7), 400, "messages[0].content"),
    Case("content a lone surrogate", _message("\ud800"), 400, "messages[0].content"),
    Case(
        "temperature infinite",
        json.dumps(GOOD).replace('"temperature": 0', '"temperature": 1e999').encode(),
        400,
        "temperature",
    ),
    Case(
        "temperature NaN",
        json.dumps(GOOD).replace('"temperature": 0', '"temperature": NaN').encode(),
        400,
        "temperature",
    ),
    Case("temperature 1e-40", _with(temperature=1e-40), 200),
    Case("temperature 3", _with(temperature=3), 400, "temperature"),
    Case("temperature a string", _with(temperature="hot"), 400, "temperature"),
    Case("top_p 2", _with(top_p=2), 400, "top_p"),
    Case("max_tokens 0", _with(max_tokens=0), 400, "max_tokens"),
    Case("max_tokens 2.5", _with(max_tokens=2.5), 400, "max_tokens"),
    Case("max_tokens beyond the context", _with(max_tokens=10**9), 400),
    Case("stop of 600,000 characters", _with(stop="x" * 600_000, max_tokens=2), 400, "stop"),
    Case("stop of 5 strings", _with(stop=list("abcde")), 400, "stop"),
    Case("stop empty", _with(stop=""), 400, "stop"),
    Case("logprobs 1 (a boolean in chat)", _with(logprobs=1), 400, "logprobs"),
    Case("top_logprobs without logprobs", _with(top_logprobs=2), 400, "top_logprobs"),
    Case("presence_penalty", _with(presence_penalty=0.5), 400, "presence_penalty"),
    Case("tools", _with(tools=[{"type": "function", "function": {"name": "f"}}]), 400, "tools"),
    Case("response_format json", _with(response_format={"type": "json_object"}), 400, "response_format"),
    Case("a field the API does not have", _with(colour="blue"), 400, "colour"),
    Case("seed", _with(seed=7, temperature=1), 200),
    Case("cache_salt of 1,000 characters", _with(cache_salt="s" * 1000), 400, "cache_salt"),
    Case("GET", b"", 405, method="GET"),
    Case("an unknown path", GOOD, 404, path="/v1/completion"),
    Case("a body that is not UTF-8", b'{"model": "\xff"}', 400),
    Case("a body that is not JSON", b"{", 400),
    Case("JSON nested 100,000 deep", b"[" * 100_000 + b"]" * 100_000, 400),
    Case("a body of 3 MB", json.dumps(_message("llama " * 500_000)).encode(), 413),
]


def post(url: str, body: object, method: str = "POST", headers: dict | None = None, timeout: float = 60):
    """Sends `body` (as JSON unless it is bytes) and reads the whole answer, streamed or not, within `timeout`
    seconds in all (`requests.Timeout` else: an endless stream is a hang too). Returns the response and the seconds it
    took."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **(headers or {})}
    start = time.perf_counter()
    with requests.request(method, url, data=data, headers=headers, timeout=timeout, stream=True) as response:
        chunks = []
        for chunk in response.iter_content(chunk_size=None):
            chunks.append(chunk)
            if time.perf_counter() - start > timeout:
                raise requests.Timeout(f"no whole answer after {timeout} s")
        response._content = b"".join(chunks)  # what `.text` and `.json()` read
    return response, time.perf_counter() - start


def openai_error(response: requests.Response) -> dict | None:
    """The error of an answer in the OpenAI API's format (`{"error": {"message", "type", "param", "code"}}`), or
    None if it is not one."""
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        return None
    if isinstance(error, dict) and set(error) == {"message", "type", "param", "code"} and error["message"]:
        return error
    return None


# random JSON: what a confused or hostile client may put in any field
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
_parts = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=30)}),
    st.fixed_dictionaries({"type": st.sampled_from(["image_url", "input_audio", "file", "text"]), "x": json_values}),
    json_values,
)
_contents = st.one_of(st.text(max_size=60), st.none(), st.lists(_parts, max_size=3), json_values)
_messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool", "robot"]), "content": _contents},
        optional={"name": st.text(max_size=5), "tool_calls": json_values},
    ),
    max_size=3,
)
FIELDS = [
    "model",
    "messages",
    "temperature",
    "top_p",
    "n",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "stream",
    "stream_options",
    "seed",
    "user",
    "logprobs",
    "top_logprobs",
    "tools",
    "tool_choice",
    "response_format",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "cache_salt",
    "metadata",
]
_field_values = {
    "messages": _messages,
    "temperature": st.floats(-1, 3) | json_values,
    "top_p": st.floats(-0.5, 1.5) | json_values,
    "n": st.integers(-1, 3) | json_values,
    "max_tokens": st.integers(-2, 40) | json_values,
    "stop": st.text(max_size=5) | st.lists(st.text(max_size=5), max_size=6) | json_values,
    "stream": st.booleans() | json_values,
}
_fields = st.sampled_from(FIELDS) | st.text(max_size=10)
_changes = st.dictionaries(_fields, st.one_of(json_values, *_field_values.values()), max_size=4)

#: a request body: random JSON, or a good request with random fields changed, added or removed
bodies = st.one_of(
    json_values,
    st.builds(
        lambda changes, drop: {k: v for k, v in {**GOOD, **changes}.items() if k not in drop},
        _changes,
        st.sets(st.sampled_from(sorted(GOOD)), max_size=2),
    ),
    st.builds(
        lambda messages, fields: {**GOOD, **fields, "messages": messages},
        _messages,
        st.fixed_dictionaries({}, optional={k: v for k, v in _field_values.items() if k != "messages"}),
    ),
)
