"""Prompt lookup over earlier generations: sequences of requests through one `LLM`, or through `litgpt serve`.

    python -m benchmarks.lookup_workload [--repeats 3] [--threads 1] [--out benchmarks/results/cpu] [--server]

SmolLM2-135M-Instruct (tools/smollm2.py), float32, greedy, up to 128 new tokens, through `LLM.generate`. The
workloads of benchmarks/lookup_workloads.json are sent in order: repetitive ones (requests of one kind whose answers
share structure) and unrelated requests (the tasks of prompt_lookup_tasks.json, then the README's first lookup
example). Each request runs three ways, interleaved (the order rotates from request to request): the target alone;
lookup in the prompt and the answer only (`prompt_lookup=True, lookup_cache_tokens=0`); and lookup in earlier
generations too (`prompt_lookup=True`, the LLM's cache at its default bound, which holds what the earlier requests
of the repeat generated: each repeat starts from an empty cache). Ratios of tokens/s are paired request by request.
Also per request: the accepted tokens per verification, the lookup's seconds per round (`PromptLookup.propose`)
against the seconds per token of the target alone, whether the outputs equal the target alone's; and at the end the
memory of the cache per stored token (tracemalloc, rebuilt from what it held).

With `--server`, the same requests go to three `litgpt serve --openai_spec true` servers of the checkpoint, one per
way (`--prompt_lookup true`, with `--lookup_cache_tokens 0` for prompt only and 65536, the `LLM`'s default, for
earlier generations), restarted for each repeat so that the cache starts empty, with the `openai` client (not
streamed, every request with the same `cache_salt`, as one client that shares its answers would send them): tokens/s
are completion tokens over the client's latency, the accepted tokens per verification come from each server's
`/metrics` before and after the request, and the answers must equal the answers of the server without lookup. Each
server first answers "Hi" (2 tokens, not measured).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import openai
import requests
import torch
from litgpt import LLM
from litgpt.generate.prompt_lookup import SEPARATOR, LookupCache, PromptLookup

from benchmarks.report import run_machine, summary
from harness import litgpt_server
from tools import smollm2

ROOT = Path(__file__).resolve().parent.parent

WORKLOADS = ROOT / "benchmarks" / "lookup_workloads.json"
TASKS = ROOT / "benchmarks" / "prompt_lookup_tasks.json"
VARIANTS = {
    "alone": {},
    "prompt only": {"prompt_lookup": True, "lookup_cache_tokens": 0},
    "earlier": {"prompt_lookup": True},
}
SERVER_OPTIONS = {
    "alone": [],
    "prompt only": ["--prompt_lookup", "true", "--lookup_cache_tokens", "0"],
    "earlier": ["--prompt_lookup", "true", "--lookup_cache_tokens", "65536"],  # the server's default is 0
}
SALT = "benchmark-client"  # the one client's `cache_salt`: its requests share their answers


class ProposeTimer:
    """Times `PromptLookup.propose` while it is installed."""

    def __init__(self) -> None:
        self.seconds, self.calls = 0.0, 0
        self.propose = PromptLookup.propose

    def __enter__(self) -> ProposeTimer:
        def timed(lookup: PromptLookup, limit: int):
            start = time.perf_counter()
            try:
                return self.propose(lookup, limit)
            finally:
                self.seconds += time.perf_counter() - start
                self.calls += 1

        PromptLookup.propose = timed
        return self

    def __exit__(self, *exc) -> None:
        PromptLookup.propose = self.propose


def workloads(quick: bool) -> list[dict]:
    data = json.loads(WORKLOADS.read_text())
    tasks = json.loads(TASKS.read_text())["tasks"]
    unrelated = [task["prompt"] for task in tasks] + [data["readme_example"]]
    loads = data["workloads"] + [{"name": "unrelated requests", "kind": "unrelated", "prompts": unrelated}]
    if quick:
        loads = [{**load, "prompts": load["prompts"][:2]} for load in (loads[0], loads[-1])]
    return loads


def run(llm: LLM, prompt: str, new_tokens: int, variant: str, cache: LookupCache | None) -> tuple[dict, LookupCache]:
    """One request, with `cache` as the LLM's cache of earlier generations (None: a new one); returns its record and
    the cache, which only the earlier-generations variant extends."""
    llm.lookup_cache = cache if variant == "earlier" else None  # prompt only: a cache of 0 tokens, dropped after
    with ProposeTimer() as timer:
        start = time.perf_counter()
        ids = llm.generate(
            prompt, max_new_tokens=new_tokens, temperature=0.0, return_as_token_ids=True, **VARIANTS[variant]
        )
        seconds = time.perf_counter() - start
    counts = llm.draft_counts
    record = {"variant": variant, "seconds": seconds, "tokens": ids.tolist(), "rounds": counts.drafts}
    record["accepted_per_verification"] = counts.accepted_tokens / counts.drafts if counts.drafts else 0.0
    record["propose_seconds"] = timer.seconds / timer.calls if timer.calls else 0.0
    return record, llm.lookup_cache if variant == "earlier" else cache


def one_repeat(loads: list[dict], repeat: int, repeats: int, request: Callable[[str, str], dict]) -> list[dict]:
    """The requests of `loads` in order, each sent the three ways in an order that rotates from request to request
    (and on across repeats), as `request(prompt, variant)` records them."""
    records = []
    turn = repeat * sum(len(load["prompts"]) for load in loads)
    for load in loads:
        for index, prompt in enumerate(load["prompts"]):
            order = list(VARIANTS)[turn % 3 :] + list(VARIANTS)[: turn % 3]
            turn += 1
            for variant in order:
                records.append({"repeat": repeat, "workload": load["name"], "index": index, **request(prompt, variant)})
            print(
                f"repeat {repeat + 1}/{repeats} {load['name']} #{index + 1}: "
                + ", ".join(f"{r['variant']} {speed(r):.1f} tok/s" for r in records[-3:]),
                flush=True,
            )
    return records


def measure(llm: LLM, loads: list[dict], new_tokens: int, repeats: int) -> tuple[list[dict], LookupCache]:
    records, cache = [], None
    llm.generate(loads[0]["prompts"][0], max_new_tokens=8, prompt_lookup=True, lookup_cache_tokens=0)  # warm-up

    def request(prompt: str, variant: str) -> dict:
        nonlocal cache
        record, cache = run(llm, prompt, new_tokens, variant, cache)
        return record

    for repeat in range(repeats):
        cache = None  # each repeat starts from an empty cache
        records += one_repeat(loads, repeat, repeats, request)
    return records, cache


def spec_decode_counts(server: litgpt_server.Server) -> tuple[float, float]:
    """The server's rounds that verified proposed tokens, and its accepted tokens, so far (from `/metrics`)."""
    values = {}
    for line in requests.get(f"{server.url}/metrics", timeout=60).text.splitlines():
        if line.startswith("litgpt:spec_decode_num_"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values.get("litgpt:spec_decode_num_drafts_total", 0.0), values.get(
        "litgpt:spec_decode_num_accepted_tokens_total", 0.0
    )


def serve_request(server: litgpt_server.Server, prompt: str, new_tokens: int, variant: str) -> dict:
    """One chat request, not streamed: its answer, completion tokens, latency and accepted tokens per verification."""
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="not needed", max_retries=0, timeout=3600)
    drafts, accepted = spec_decode_counts(server)
    start = time.perf_counter()
    answer = client.chat.completions.create(
        model="SmolLM2-135M-Instruct",
        messages=[{"role": "user", "content": prompt}],
        temperature=0,
        max_tokens=new_tokens,
        extra_body={"cache_salt": SALT},
    )
    seconds = time.perf_counter() - start
    drafts_after, accepted_after = spec_decode_counts(server)
    rounds = drafts_after - drafts
    return {
        "variant": variant,
        "seconds": seconds,
        "text": answer.choices[0].message.content,
        "completion_tokens": answer.usage.completion_tokens,
        "rounds": rounds,
        "accepted_per_verification": (accepted_after - accepted) / rounds if rounds else 0.0,
    }


def measure_served(checkpoint_dir: Path, loads: list[dict], new_tokens: int, repeats: int, threads: int) -> list[dict]:
    options = ["--openai_spec", "true", "--accelerator", "cpu", "--precision", "32-true", "--timeout", "3600"]
    options += ["--max_new_tokens", str(new_tokens)]
    records = []
    for repeat in range(repeats):
        configurations = [(checkpoint_dir, [*options, *SERVER_OPTIONS[variant]]) for variant in VARIANTS]
        with (
            tempfile.TemporaryDirectory() as log_dir,
            litgpt_server.serving(
                *configurations, log_dir=Path(log_dir), env={"OMP_NUM_THREADS": str(threads)}
            ) as started,
        ):
            servers = dict(zip(VARIANTS, started))
            for variant, server in servers.items():  # the first request of a server is slower: not measured
                serve_request(server, "Hi", 2, variant)
            records += one_repeat(
                loads,
                repeat,
                repeats,
                lambda prompt, variant: serve_request(servers[variant], prompt, new_tokens, variant),
            )
    return records


def token_count(record: dict) -> int:
    """The tokens a request generated: counted by the server, or those `LLM.generate` returned."""
    return record["completion_tokens"] if "completion_tokens" in record else len(record["tokens"])


def speed(record: dict) -> float:
    return token_count(record) / record["seconds"]


def cache_bytes_per_token(cache: LookupCache) -> float:
    """The memory of a cache holding what `cache` holds, per stored token."""
    generations, current = [], []
    for token in cache.tokens[cache.start :]:
        if token == SEPARATOR:
            generations.append(current)
            current = []
        else:
            current.append(token)
    tracemalloc.start()
    rebuilt = LookupCache(cache.max_tokens)
    for generation in generations:
        rebuilt.add(generation)
    memory, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return memory / max(len(rebuilt), 1)


def analyse(results: dict) -> list[dict]:
    """Per workload and request index: the paired ratios and the means of the lookup statistics."""
    by_request = {}
    for r in results["records"]:
        by_request.setdefault((r["workload"], r["index"]), {}).setdefault(r["variant"], []).append(r)
    rows = []
    for (workload, index), variants in by_request.items():
        speeds = {v: [speed(r) for r in rs] for v, rs in variants.items()}
        alone = variants["alone"]
        output = "text" if "text" in alone[0] else "tokens"
        rows.append(
            {
                "workload": workload,
                "index": index,
                "tokens": token_count(alone[0]),
                "earlier / alone": [a / b for a, b in zip(speeds["earlier"], speeds["alone"])],
                "earlier / prompt only": [a / b for a, b in zip(speeds["earlier"], speeds["prompt only"])],
                "prompt only / alone": [a / b for a, b in zip(speeds["prompt only"], speeds["alone"])],
                "accepted prompt only": statistics.mean(
                    r["accepted_per_verification"] for r in variants["prompt only"]
                ),
                "accepted earlier": statistics.mean(r["accepted_per_verification"] for r in variants["earlier"]),
                # a round's lookup against a step of the target alone (its seconds per token), not timed in a server
                "lookup share": statistics.mean(r["propose_seconds"] for r in variants["earlier"])
                / statistics.mean(r["seconds"] / max(token_count(r), 1) for r in alone)
                if "propose_seconds" in alone[0]
                else None,
                "identical": all(r[output] == alone[0][output] for rs in variants.values() for r in rs),
            }
        )
    return rows


def markdown(results: dict) -> str:
    machine, rows = results["machine"], analyse(results)
    lines = [
        "# Prompt lookup over earlier generations",
        "",
        f"`{machine['command']}` on {machine['date']}: {machine['device']}, {machine['threads']} thread(s), torch"
        f" {machine['torch']}, {machine['repeats']} repeats, up to {machine['new_tokens']} new tokens, greedy."
        " SmolLM2-135M-Instruct, float32, "
        + (
            "through three `litgpt serve --openai_spec true` servers, one per way, restarted per repeat."
            if machine.get("server")
            else "through one `LLM`."
        ),
        "",
        "Per request, in the order sent: tokens/s ratios paired repeat by repeat, median (quartiles). earlier: lookup"
        " in the prompt, the answer and the earlier generations of the repeat (`prompt_lookup=True`); prompt only:"
        " `lookup_cache_tokens=0`; alone: the target alone. Accepted per verification: the mean accepted tokens per"
        " round that verified looked-up tokens. Lookup / step: the seconds of a round's lookup over the seconds per"
        " token of the target alone.",
    ]
    for workload in dict.fromkeys(row["workload"] for row in rows):
        lines += ["", f"## {workload}", ""]
        lines += [
            "| # | tokens | earlier / prompt only | earlier / alone | prompt only / alone | accepted per verification:"
            " prompt only, earlier | lookup / step | identical |",
            "|---|---|---|---|---|---|---|---|",
        ]
        selected = [row for row in rows if row["workload"] == workload]
        for row in selected:
            lines.append(
                f"| {row['index'] + 1} | {row['tokens']} | {summary(row['earlier / prompt only'])} |"
                f" {summary(row['earlier / alone'])} | {summary(row['prompt only / alone'])} |"
                f" {row['accepted prompt only']:.2f}, {row['accepted earlier']:.2f} |"
                f" {'-' if row['lookup share'] is None else format(row['lookup share'], '.1%')} |"
                f" {'yes' if row['identical'] else '**no**'} |"
            )
        later = [statistics.median(row["earlier / prompt only"]) for row in selected[2:]]
        later_alone = [statistics.median(row["earlier / alone"]) for row in selected[2:]]
        if later:
            lines += [
                "",
                f"From the third request on: earlier / prompt only median {statistics.median(later):.2f}, lowest"
                f" {min(later):.2f}; earlier / alone median {statistics.median(later_alone):.2f}, lowest"
                f" {min(later_alone):.2f}.",
            ]
    if "bytes_per_token" in results:
        lines += ["", f"Memory of the cache at the end: {results['bytes_per_token']:.0f} bytes per stored token."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu")
    parser.add_argument("--quick", action="store_true", help="two requests of two workloads, 12 new tokens, one repeat")
    parser.add_argument("--server", action="store_true", help="through litgpt serve: OUT/lookup_workload_serve.*")
    parser.add_argument(
        "--report", action="store_true", help="only write the .md of OUT's results from the .json again"
    )
    args = parser.parse_args()
    name = "lookup_workload_serve" if args.server else "lookup_workload"
    if args.report:
        results = json.loads((args.out / f"{name}.json").read_text())
        (args.out / f"{name}.md").write_text(markdown(results))
        return 0
    if args.quick:
        args.repeats, args.new_tokens = 1, 12
    torch.set_num_threads(args.threads)
    checkpoint_dir = smollm2.make_checkpoint(ROOT / "build" / "smollm2")
    loads = workloads(args.quick)
    results = {}
    if args.server:
        records = measure_served(checkpoint_dir, loads, args.new_tokens, args.repeats, args.threads)
    else:
        llm = LLM.load(str(checkpoint_dir), distribute=None)
        llm.distribute(accelerator="cpu", precision="32-true")
        records, cache = measure(llm, loads, args.new_tokens, args.repeats)
        results["bytes_per_token"] = cache_bytes_per_token(cache)
    results = {"machine": run_machine(args, server=args.server), "workloads": loads, "records": records, **results}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(results, indent=1))
    (args.out / f"{name}.md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
