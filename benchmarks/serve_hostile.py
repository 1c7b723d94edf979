"""`litgpt serve --openai_spec true` under hostile clients, for one build of the fork or two (before and after).

    python -m benchmarks.serve_hostile [--before DIR] [--requests 500] [--repeats 3] [--max-batch-size N]
        [--out benchmarks/results/cpu]

For each build (the installed fork, "after", and with `--before` a patched tree put first on the servers'
PYTHONPATH, "before"):

- hostile requests, to a tiny checkpoint's server (prompt lookup, `--max_new_tokens 200`): every case of
  harness/hostile_requests.py, then `--requests` bodies that hypothesis generates anew in every run (random JSON, random
  field types and values, random message parts). Per request its status and seconds; a request without an answer in
  30 s is a hang, after which the server is restarted. The greedy answer to a fixed request is asked after every
  case and after every 25 generated requests, and must stay what it was.
- memory: the resident memory of the server's processes after 10 requests and after 1,000 (greedy and sampled,
  streamed or not, one in ten a bad request).
- dropped streams, on SmolLM2-135M-Instruct (tools/smollm2.py) with `--prompt_lookup true`: 8 clients at once ask
  for 16 tokens, right after 4 clients opened a 256-token stream and went away after its first event, against the
  same 8 clients with no streams dropped before; interleaved, `--repeats` times. The server answers the 8 in turn,
  in an order that varies, so the i-th answer to come after the drops is paired with the i-th without, repeat by
  repeat: each ratio says how much later that answer came.

With `--max-batch-size N` every server answers concurrent requests together (`--max_batch_size N`).

Results go to OUT/serve_hostile.json and OUT/serve_hostile.md; `--summarize` writes them again from the JSON.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests
from hypothesis import HealthCheck, given, settings

from benchmarks.report import command_line, summary
from demo import tiny_checkpoints
from harness import hostile_requests, litgpt_server
from harness.hostile_requests import GOOD, PATH, post
from tools import smollm2

ROOT = Path(__file__).resolve().parent.parent

HANG_S = 30
TEMPLATE = "{% for message in messages %}{{ message['content'] }} {% endfor %}"
OPTIONS = ["--openai_spec", "true", "--accelerator", "cpu", "--precision", "32-true", "--timeout", "600"]


def supports_host(env: dict[str, str]) -> bool:
    """Whether the build's `litgpt serve` has `--host` (the build before issue 28 has not)."""
    code = "import inspect, litgpt.deploy.serve as s; print('host' in inspect.signature(s.run_server).parameters)"
    return subprocess.check_output([sys.executable, "-c", code], env={**os.environ, **env}, text=True).strip() == "True"


class Restartable:
    """A server that is started again when it stops answering."""

    def __init__(self, checkpoint: Path, options: list[str], log_dir: Path, env: dict[str, str]) -> None:
        self.checkpoint, self.options, self.log_dir, self.env = checkpoint, options, log_dir, env
        self.restarts = 0
        self.server = self._start()

    def _start(self) -> litgpt_server.Server:
        log_path = self.log_dir / f"server-{self.checkpoint.name}-{self.restarts}.log"
        server = litgpt_server.start(self.checkpoint, *self.options, log_path=log_path, env=self.env)
        litgpt_server.wait_until_healthy(server)
        return server

    def restart(self) -> None:
        litgpt_server.stop(self.server)
        self.restarts += 1
        self.server = self._start()

    def send(self, body: object, method: str = "POST", path: str = PATH) -> tuple[int | str, float]:
        """The status of the answer (or "hang", after which the server is restarted) and its seconds."""
        try:
            response, seconds = post(self.server.url + path, body, method, timeout=HANG_S)
            return response.status_code, seconds
        except requests.RequestException:
            self.restart()
            return "hang", HANG_S

    def greedy(self) -> str | None:
        """The answer to the greedy request GOOD, or None if there is none."""
        try:
            response, _ = post(self.server.url + PATH, GOOD, timeout=HANG_S)
        except requests.RequestException:
            self.restart()
            return None
        return response.json()["choices"][0]["message"]["content"] if response.status_code == 200 else None


def hostile(server: Restartable, count: int) -> dict:
    """The catalog and `count` generated bodies: each request's status, and whether the greedy answer changed."""
    expected = server.greedy()
    record = {"greedy": expected, "cases": [], "generated": [], "greedy_checks": 0, "greedy_changed": 0}

    def check_greedy() -> None:
        record["greedy_checks"] += 1
        record["greedy_changed"] += server.greedy() != expected

    for case in hostile_requests.CASES:
        status, seconds = server.send(case.body, case.method, case.path)
        record["cases"].append({"name": case.name, "expected": case.status, "status": status, "seconds": seconds})
        check_greedy()

    @settings(max_examples=count, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(body=hostile_requests.bodies)
    def send_generated(body) -> None:
        status, seconds = server.send(body)
        record["generated"].append({"status": status, "seconds": seconds})
        if len(record["generated"]) % 25 == 0:
            check_greedy()

    send_generated()
    check_greedy()
    return record


def memory(server: Restartable) -> dict:
    """RSS after the first 10 requests and after 1,000."""
    rss = {}
    for i in range(1000):
        prompt = f"{tiny_checkpoints.WORDS[i % 40]} {tiny_checkpoints.WORDS[(7 * i) % 50]} eats"
        body = {**GOOD, "messages": [{"role": "user", "content": prompt}], "stream": i % 2 == 0}
        body["temperature"] = 0 if i % 3 else 1
        if i % 10 == 9:
            body["n"] = 0  # a bad request
        server.send(body)
        if i + 1 in (10, 1000):
            rss[i + 1] = litgpt_server.rss_mib(server.server)
    return {"rss_after_10_mib": rss[10], "rss_after_1000_mib": rss[1000], "grown_mib": rss[1000] - rss[10]}


def clients_after_drops(server: Restartable, drops: int, clients: int = 8) -> list[float]:
    """`drops` streams opened and dropped after their first event, then `clients` requests for 16 tokens at once:
    the latency of each."""
    for i in range(drops):
        body = {"messages": [{"role": "user", "content": f"Tell a long story about llama number {i}."}]}
        body.update(max_tokens=256, temperature=0, stream=True)
        with requests.post(server.server.url + PATH, json=body, stream=True, timeout=600) as response:
            next(response.iter_lines())

    def one(i: int) -> float:
        body = {"messages": [{"role": "user", "content": f"Name {i + 2} colours."}], "max_tokens": 16, "temperature": 0}
        response, seconds = post(server.server.url + PATH, body, timeout=900)
        assert response.status_code == 200, response.text
        return seconds

    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(one, range(clients)))


def dropped_streams(server: Restartable, repeats: int) -> dict:
    runs = []
    for repeat in range(repeats):
        order = (0, 4) if repeat % 2 == 0 else (4, 0)
        latencies = {drops: clients_after_drops(server, drops) for drops in order}
        runs.append({"without_drops_s": latencies[0], "after_4_drops_s": latencies[4]})
        time.sleep(2)
    return summarize_drops(runs)


def summarize_drops(runs: list[dict]) -> dict:
    """The latency ratios of the i-th answer after the drops to the i-th without, repeat by repeat."""
    ratios = [
        after / without
        for run in runs
        for after, without in zip(sorted(run["after_4_drops_s"]), sorted(run["without_drops_s"]))
    ]
    return {"runs": runs, "ratio_median": statistics.median(ratios), "ratio_max": max(ratios), "ratios": ratios}


def run_build(label: str, pythonpath: str | None, args: argparse.Namespace, tmp: Path) -> dict:
    env = {"PYTHONPATH": pythonpath} if pythonpath else {}
    host = ["--host", "127.0.0.1"] if supports_host(env) else []
    batching = ["--max_batch_size", str(args.max_batch_size)] if args.max_batch_size > 1 else []
    _, target = tiny_checkpoints.build_pair(tmp / label)
    (target / "chat_template.jinja").write_text(TEMPLATE)
    tiny = [*OPTIONS, "--temperature", "0", "--max_new_tokens", "200", "--prompt_lookup", "true", *host, *batching]
    server = Restartable(target, tiny, tmp / label, env)
    try:
        result = {"hostile": hostile(server, args.requests), "memory": memory(server)}
        result["restarts"] = server.restarts
    finally:
        litgpt_server.stop(server.server)
    smol = [*OPTIONS, "--max_new_tokens", "256", "--prompt_lookup", "true", *host, *batching]
    server = Restartable(smollm2.make_checkpoint(), smol, tmp / label, env)
    try:
        result["dropped_streams"] = dropped_streams(server, args.repeats)
    finally:
        litgpt_server.stop(server.server)
    return result


def counts(hostile_record: dict) -> dict:
    generated = hostile_record["generated"]
    cases = hostile_record["cases"]
    return {
        "cases_as_expected": sum(case["status"] == case["expected"] for case in cases),
        "cases": len(cases),
        "generated": len(generated),
        "5xx": sum(isinstance(r["status"], int) and r["status"] >= 500 for r in generated + cases),
        "hangs": sum(r["status"] == "hang" for r in generated + cases),
        "greedy_changed": hostile_record["greedy_changed"],
        "greedy_checks": hostile_record["greedy_checks"],
    }


def markdown(results: dict, command: str) -> str:
    lines = [f"# litgpt serve under hostile clients\n\n`{command}`, {results['date']}, {results['machine']}\n"]
    lines.append(
        "| build | catalog cases answered as expected | generated requests | 5xx | hangs | greedy answer changed "
        "| RSS after 10 → 1,000 requests "
        "| 8 clients after 4 dropped streams: latency ratio of the i-th answer (median, max) |"
    )
    lines.append("|---|---|---|---|---|---|---|---|")
    for label, result in results["builds"].items():
        c, m, d = counts(result["hostile"]), result["memory"], result["dropped_streams"]
        lines.append(
            f"| {label} | {c['cases_as_expected']} of {c['cases']} | {c['generated']} | {c['5xx']} | {c['hangs']} "
            f"| {c['greedy_changed']} of {c['greedy_checks']} checks | {m['rss_after_10_mib']:.0f} → "
            f"{m['rss_after_1000_mib']:.0f} MiB ({m['grown_mib']:+.1f}) | {d['ratio_median']:.2f}×, "
            f"{d['ratio_max']:.2f}× ({summary(d['ratios'])}) |"
        )
    lines.append("\n## Every case of harness/hostile_requests.py: the status expected and answered\n")
    labels = list(results["builds"])
    lines.append("| case | expected | " + " | ".join(labels) + " |")
    lines.append("|---|---|" + "---|" * len(labels))
    for i, case in enumerate(hostile_requests.CASES):
        answered = [results["builds"][label]["hostile"]["cases"][i] for label in labels]
        cells = " | ".join(f"{a['status']} ({a['seconds']:.2f} s)" for a in answered)
        lines.append(f"| {case.name} | {case.status} | {cells} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="a patched tree to put first on the servers' PYTHONPATH, as 'before'")
    parser.add_argument("--requests", type=int, default=500, help="generated hostile requests per build")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the dropped-streams scenario")
    parser.add_argument("--max-batch-size", type=int, default=1, help="the servers' --max_batch_size (1: off)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu")
    parser.add_argument("--summarize", action="store_true", help="write OUT's report again from its JSON")
    args = parser.parse_args()
    if args.summarize:
        results = json.loads((args.out / "serve_hostile.json").read_text())
        for result in results["builds"].values():
            result["dropped_streams"] = summarize_drops(result["dropped_streams"]["runs"])
        (args.out / "serve_hostile.json").write_text(json.dumps(results, indent=1) + "\n")
        (args.out / "serve_hostile.md").write_text(markdown(results, results["command"]))
        return
    builds = {"before": args.before, "after": None} if args.before else {"after": None}
    results = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "builds": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for label, pythonpath in builds.items():
            results["builds"][label] = run_build(label, pythonpath, args, Path(tmp))
            print(label, counts(results["builds"][label]["hostile"]), results["builds"][label]["memory"], flush=True)
    command = command_line()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "serve_hostile.json").write_text(json.dumps({"command": command, **results}, indent=1) + "\n")
    (args.out / "serve_hostile.md").write_text(markdown(results, command))
    print(markdown(results, command))


if __name__ == "__main__":
    main()
