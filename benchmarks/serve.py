"""Serving with prompt lookup, or with continuous batching: two `litgpt serve --openai_spec true` servers of one
checkpoint, one of them with `--prompt_lookup true` (or, with `--compare batching`, one that answers one request at a
time and one with `--max_batch_size`; with `--compare draft`, both batching with `--prompt_lookup true`, one of them
with SmolLM2's first 4 blocks as `--draft_model` too, which cannot pay; with `--compare builds --before DIR`, the same
server of two builds: a patched tree put first on the first server's PYTHONPATH, and the installed one).

    python -m benchmarks.serve [--repeats 3] [--threads 1] [--out benchmarks/results/cpu]
    python -m benchmarks.serve --compare batching --max-batch-size 8 --clients 1 2 4 8
    python -m benchmarks.serve --max-batch-size 8 --clients 1 2 4 8   # lookup against none, both batching
    python -m benchmarks.serve --compare draft --clients 1 4 8   # lookup and a draft against lookup, both batching

SmolLM2-135M-Instruct (tools/smollm2.py), float32, greedy, up to 128 new tokens, the chat requests of
benchmarks/prompt_lookup_tasks.json (answers that copy from the prompt, and open ones), sent with the `openai` client
and streamed. Per request: the time to the first streamed text, the tokens per second (completion tokens / latency,
as the client sees them) and the latency; at 1 client, and at N clients that send N requests of one kind at once
(a server without batching answers them in turn, so the later ones wait). The two servers are interleaved (which
one goes first alternates) and compared request by request. The same prompts through `LLM.generate` in this
process, with and without `prompt_lookup=True`, give the gain that the server should keep (not with `--compare
batching`). Every answer must equal the answer of the first server; the servers run with `OMP_NUM_THREADS` threads,
and this process with as many.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import requests
import torch
from litgpt import LLM

from benchmarks.report import run_machine, summary
from harness import litgpt_server
from tools import layer_draft, smollm2

ROOT = Path(__file__).resolve().parent.parent

TASKS = ROOT / "benchmarks" / "prompt_lookup_tasks.json"
COMPARISONS = {
    "lookup": ("alone", "lookup"),
    "batching": ("one at a time", "batched"),
    "draft": ("lookup", "lookup + draft"),
    "builds": ("before", "after"),
}
CONCURRENCY = (1, 2, 4, 8)


def stream_request(server: litgpt_server.Server, prompt: str, new_tokens: int) -> dict:
    """One streamed chat request: its text, token count, time to the first text, and latency (seconds)."""
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="not needed", max_retries=0, timeout=3600)
    start = time.perf_counter()
    first, pieces, tokens = None, [], None
    messages = [{"role": "user", "content": prompt}]
    for chunk in client.chat.completions.create(
        model="SmolLM2-135M-Instruct", messages=messages, temperature=0, max_tokens=new_tokens, stream=True
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            first = first or time.perf_counter()
            pieces.append(chunk.choices[0].delta.content)
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
    end = time.perf_counter()
    return {"text": "".join(pieces), "tokens": tokens, "ttft_s": first - start, "latency_s": end - start}


def batches(tasks: list[dict], clients: int) -> list[list[dict]]:
    """The tasks of one kind in groups of `clients` sent at once (tasks repeat to fill the last group)."""
    if clients == 1:
        return [[task] for task in tasks]
    count = -(-len(tasks) // clients) * clients
    cycled = list(itertools.islice(itertools.cycle(tasks), count))
    return [cycled[i : i + clients] for i in range(0, count, clients)]


def measure(
    servers: dict, llm: LLM | None, tasks: list[dict], new_tokens: int, repeats: int, concurrency: list[int]
) -> list[dict]:
    """Each batch of requests on both servers, interleaved (which goes first alternates), and at 1 client the same
    prompt through `LLM.generate` with and without lookup right after: one record per request."""
    records = []
    for repeat in range(repeats):
        for clients in concurrency:
            for kind in ("copy", "open"):
                for index, batch in enumerate(batches([t for t in tasks if t["kind"] == kind], clients)):
                    names = list(servers)
                    order = names if (repeat + index) % 2 == 0 else names[::-1]
                    where = {"repeat": repeat, "clients": clients, "batch": index, "kind": kind}
                    for name in order:
                        start = time.perf_counter()
                        with ThreadPoolExecutor(max_workers=clients) as pool:
                            jobs = [pool.submit(stream_request, servers[name], t["prompt"], new_tokens) for t in batch]
                            answers = [job.result() for job in jobs]
                        wall_s = time.perf_counter() - start
                        for slot, (task, answer) in enumerate(zip(batch, answers)):
                            records.append({**where, "slot": slot, "task": task["name"], "server": name, **answer})
                            records[-1]["batch_wall_s"] = wall_s
                    if clients == 1 and llm is not None:
                        for name in order:
                            records.append({**where, "slot": 0, "task": batch[0]["name"], "server": f"api {name}"})
                            records[-1]["latency_s"] = generate_seconds(llm, batch[0]["prompt"], new_tokens, name)
                    print(f"repeat {repeat}, {clients} client(s), {kind} batch {index}: done", flush=True)
    return records


def generate_seconds(llm: LLM, prompt: str, new_tokens: int, name: str) -> float:
    """The seconds of `LLM.generate` for `prompt`, greedy, with prompt lookup for `name` "lookup"."""
    start = time.perf_counter()
    llm.generate(prompt, temperature=0, max_new_tokens=new_tokens, prompt_lookup=name == "lookup")
    return time.perf_counter() - start


def add_speeds(records: list[dict]) -> None:
    """The rate at which an answer streams once it started: its tokens after the first over the time after it
    (at 4 clients a request's wait for the others is before its first token, so it does not count)."""
    for record in records:
        if "ttft_s" in record:
            record["tokens_per_s"] = (record["tokens"] - 1) / (record["latency_s"] - record["ttft_s"])


def paired(records: list[dict], clients: int, task: str, field: str, names: tuple[str, str]) -> list[float]:
    """`field` of names[0] over names[1] for each request of `task` at `clients`, paired repeat, batch and slot:
    the second server over the first for speeds, the first over the second for seconds."""
    chosen = [r for r in records if r["clients"] == clients and r["task"] == task]
    by_key = {(r["repeat"], r["batch"], r["slot"], r["server"]): r for r in chosen}
    return [
        by_key[(repeat, batch, slot, names[1])][field] / record[field]
        for (repeat, batch, slot, server), record in by_key.items()
        if server == names[0]
    ]


def per_batch(records: list[dict], field: str, names: tuple[str, str]) -> dict[tuple, float]:
    """At several clients: the first server over the second of a batch's `field`, averaged over its requests, per
    (clients, kind, repeat, batch)."""
    means = {}
    for record in records:
        if record["clients"] > 1:
            key = (record["clients"], record["kind"], record["repeat"], record["batch"], record["server"])
            means.setdefault(key, []).append(record[field])
    return {
        key[:4]: statistics.mean(values) / statistics.mean(means[(*key[:4], names[1])])
        for key, values in means.items()
        if key[4] == names[0]
    }


def analyse(results: dict) -> dict:
    """Per task and concurrency: the paired ratios, the API's gain, and whether every answer was right."""
    records, names = results["records"], tuple(results["machine"].get("servers", COMPARISONS["lookup"]))
    served = [r for r in records if r["server"] in names]
    alone_text = {r["task"]: r["text"] for r in served if r["server"] == names[0]}
    rows = {}
    for clients in results["machine"]["clients"]:
        for task in results["tasks"]:
            name = task["name"]
            row = {
                "clients": clients,
                "task": name,
                "kind": task["kind"],
                "tokens": statistics.median(r["tokens"] for r in served if r["task"] == name),
                "tokens_per_s": paired(records, clients, name, "tokens_per_s", names),
                "ttft": paired(records, clients, name, "ttft_s", names[::-1]),
                "latency": paired(records, clients, name, "latency_s", names[::-1]),
            }
            if clients == 1 and names == COMPARISONS["lookup"]:
                # the server's gain in latency over the API's in seconds, paired repeat by repeat
                api_gain = paired(records, 1, name, "latency_s", ("api lookup", "api alone"))
                row["api_gain"] = api_gain
                row["of_api_gain"] = [server / api for server, api in zip(row["latency"], api_gain)]
            rows[f"{clients}|{name}"] = row
    batches = {field: per_batch(records, field, names) for field in ("batch_wall_s", "ttft_s")}
    wrong = [r for r in served if r["text"] != alone_text[r["task"]] or r["tokens"] is None]
    return {"rows": rows, "batches": batches, "wrong": len(wrong), "requests": len(served)}


def markdown(results: dict) -> str:
    machine, analysis = results["machine"], analyse(results)
    names = tuple(machine.get("servers", COMPARISONS["lookup"]))
    batching, drafting = names == COMPARISONS["batching"], names == COMPARISONS["draft"]
    titles = {
        COMPARISONS["batching"]: "# Serving with continuous batching",
        COMPARISONS["draft"]: "# Serving with prompt lookup and a draft model",
        COMPARISONS["builds"]: "# Serving, two builds",
    }
    lines = [
        titles.get(names, "# Serving with prompt lookup"),
        "",
        f"`{machine['command']}` on {machine['date']}: {machine['device']}, {machine['threads']} thread(s) per server"
        f" process and in the client, torch {machine['torch']}, litserve {machine['litserve']}, {machine['repeats']}"
        f" repeats, up to {machine['new_tokens']} new tokens, greedy. SmolLM2-135M-Instruct, float32.",
        "",
    ]
    if "peak_rss_mib" in machine:
        lines += [
            "Peak resident memory of each server's processes (each process's peak, summed): "
            + ", ".join(f"{name} {mib:,} MiB" for name, mib in machine["peak_rss_mib"].items())
            + ".",
            "",
        ]
    if batching:
        lines += [
            f"The server with `--max_batch_size {machine['max_batch_size']}` (batched) against the same server with"
            " `--max_batch_size 1` (one at a time), paired request by request: median (quartiles). At N clients, N"
            " requests of one kind are sent at once. Tokens/s: the rate at which an answer streams once it started,"
            " batched over one at a time; time to first token and latency: one at a time over batched (above 1:"
            " batching is faster)."
            + (" Both servers run with `--prompt_lookup true`." if machine.get("prompt_lookup") else ""),
        ]
    elif drafting:
        lines += [
            f"Both servers run with `--max_batch_size {machine['max_batch_size']}` and `--prompt_lookup true`; one of"
            " them also with SmolLM2's first 4 blocks as `--draft_model` (`--speculative_k auto`), which cannot pay."
            " Paired request by request: median (quartiles). Tokens/s: the rate at which an answer streams once it"
            " started, lookup + draft over lookup; time to first token and latency: lookup over lookup + draft (above"
            " 1: the draft makes it faster).",
        ]
    elif names == COMPARISONS["builds"]:
        flags = [
            flag
            for flag, key in (("--prompt_lookup true", "prompt_lookup"), ("a --draft_model", "draft"))
            if machine.get(key)
        ]
        lines += [
            "The server of this build (after) against that of the build in `--before` (before), both with the same"
            f" flags ({' and '.join(flags) or 'neither lookup nor a draft model'}), paired request by request: median"
            " (quartiles)."
            " Tokens/s: the rate at which an answer streams once it started (its tokens after the first over the time"
            " after the first), after over before; time to first token and latency: before over after (above 1: this"
            " build is faster).",
        ]
    else:
        if machine.get("max_batch_size", 1) > 1:
            lines += [f"Both servers run with `--max_batch_size {machine['max_batch_size']}`.", ""]
        lines += [
            "The server with `--prompt_lookup true` against the same server without it, paired request by request:"
            " median (quartiles). Tokens/s: the rate at which an answer streams once it started (its tokens after the"
            " first over the time after the first), lookup over alone; time to first token and latency: alone over"
            " lookup (above 1: lookup is faster). At N clients the N requests of a batch are sent at once (without"
            " batching, answered in turn, in an order that differs from server to server): their waits are compared per"
            " batch, below."
            " API gain: the"
            " seconds of `LLM.generate(prompt)` over `LLM.generate(prompt, prompt_lookup=True)` for the same chat"
            " message in the client's process, right after the servers answered it; of API gain: the server's latency"
            " gain over it, paired repeat by repeat.",
        ]
    if batching:
        lines += [
            "",
            "| clients | " + " | ".join(f"{name}: tokens/s, median time to first token" for name in names) + " |",
        ]
        lines += ["|---|---|---|"]
        for clients in machine["clients"]:
            cells = []
            for name in names:
                chosen = [r for r in results["records"] if r["clients"] == clients and r["server"] == name]
                walls = {(r["repeat"], r["kind"], r["batch"]): r["batch_wall_s"] for r in chosen}
                ttft = statistics.median(r["ttft_s"] for r in chosen)
                cells.append(f"{sum(r['tokens'] for r in chosen) / sum(walls.values()):.1f}, {ttft:.2f} s")
            lines.append(f"| {clients} | {' | '.join(cells)} |")
        lines += ["", "(tokens/s: all tokens of the requests sent at N clients over the wall time of their batches)"]
    lines += [
        "",
        f"Answers equal to the {names[0]} server's: {analysis['requests'] - analysis['wrong']} of"
        f" {analysis['requests']}.",
    ]
    for clients in machine["clients"]:
        api = clients == 1 and names == COMPARISONS["lookup"]
        lines += [
            "",
            f"## {clients} client{'s' * (clients > 1)}",
            "",
            "| request | kind | tokens | tokens/s | time to first token | latency"
            + (" | API gain | of API gain |" if api else " |"),
            "|---|---|---|---|---|---|" + ("---|---|" if api else ""),
        ]
        for row in analysis["rows"].values():
            if row["clients"] == clients:
                lines.append(
                    f"| {row['task']} | {row['kind']} | {row['tokens']:.0f} | {summary(row['tokens_per_s'])}"
                    f" | {summary(row['ttft'])} | {summary(row['latency'])}"
                    + (f" | {summary(row['api_gain'])} | {summary(row['of_api_gain'])} |" if api else " |")
                )
        for kind in ("copy", "open"):
            medians = [
                statistics.median(row["tokens_per_s"])
                for row in analysis["rows"].values()
                if row["clients"] == clients and row["kind"] == kind
            ]
            if not medians:
                continue
            lines.append(
                f"\n{kind}: tokens/s ratios per request {', '.join(f'{m:.2f}' for m in medians)};"
                f" median {statistics.median(medians):.2f}, lowest {min(medians):.2f}."
            )
    for clients in machine["clients"]:
        if clients == 1:
            continue
        lines += [
            "",
            f"At {clients} clients, per batch of {clients} requests sent at once, {names[0]} over {names[1]}: median"
            f" (quartiles) of the batch's wall time (its aggregate tokens/s, {names[1]} over {names[0]}, since the"
            " answers are equal) and of its mean time to first token",
            "",
        ]
        for kind in ("copy", "open"):
            wall, ttft = (
                [v for k, v in analysis["batches"][f].items() if k[:2] == (clients, kind)]
                for f in ("batch_wall_s", "ttft_s")
            )
            if wall:
                lines.append(f"- {kind}: wall time {summary(wall)}, mean time to first token {summary(ttft)}")
        if batching and 1 in machine["clients"]:
            ttft = [
                statistics.median(
                    r["ttft_s"] for r in results["records"] if r["server"] == names[1] and r["clients"] == n
                )
                for n in (clients, 1)
            ]
            lines.append(
                f"- the {names[1]} server's median time to first token at {clients} clients over at 1 client:"
                f" {ttft[0] / ttft[1]:.2f} ({ttft[0]:.3f} s / {ttft[1]:.3f} s)"
            )
    lines += ["", f"The {names[1]} server's /metrics after the run:", "", "```", results["metrics"].strip(), "```"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu")
    parser.add_argument("--quick", action="store_true", help="one task of each kind, 12 new tokens, one repeat")
    parser.add_argument("--task", action="append", help="only this task of the task set (repeatable)")
    parser.add_argument("--clients", type=int, nargs="+", choices=CONCURRENCY, default=[1, 4])
    parser.add_argument("--report", action="store_true", help="only write OUT/serve.md from its .json again")
    parser.add_argument("--compare", choices=tuple(COMPARISONS), default="lookup", help="what the servers differ in")
    parser.add_argument(
        "--max-batch-size",
        type=int,
        help="of the batched server (default 8), or of both with --compare lookup (default 1)",
    )
    parser.add_argument(
        "--prompt-lookup", action="store_true", help="with --compare batching or builds, both servers look up"
    )
    parser.add_argument("--draft", action="store_true", help="with --compare builds, both servers draft (4 blocks)")
    parser.add_argument("--before", type=Path, help="with --compare builds, a tree holding the first build's litgpt")
    args = parser.parse_args()
    if args.report:
        (args.out / "serve.md").write_text(markdown(json.loads((args.out / "serve.json").read_text())))
        return 0
    torch.set_num_threads(args.threads)
    tasks = json.loads(TASKS.read_text())["tasks"]
    if args.quick:
        tasks = [next(t for t in tasks if t["kind"] == kind) for kind in ("copy", "open")]
        args.repeats, args.new_tokens = 1, 12
    if args.task:
        tasks = [t for t in tasks if t["name"] in args.task]
    checkpoint_dir = smollm2.make_checkpoint(ROOT / "build" / "smollm2")
    options = ["--openai_spec", "true", "--accelerator", "cpu", "--precision", "32-true", "--timeout", "3600"]
    options += ["--max_new_tokens", str(args.new_tokens)]
    if args.max_batch_size is None:
        args.max_batch_size = 8 if args.compare in ("batching", "draft") else 1
    if args.compare == "draft":
        options += ["--prompt_lookup", "true", "--max_batch_size", str(args.max_batch_size), "--max_seq_length", "512"]
        draft = ["--draft_model", str(layer_draft.make_draft(checkpoint_dir, 4)), "--speculative_k", "auto"]
        configurations = [(checkpoint_dir, options), (checkpoint_dir, [*options, *draft])]
    elif args.compare == "builds":
        if args.before is None:
            parser.error("--compare builds needs --before DIR")
        options += ["--prompt_lookup", str(args.prompt_lookup).lower(), "--max_seq_length", "512"]
        options += ["--max_batch_size", str(args.max_batch_size)]
        if args.draft:
            options += ["--draft_model", str(layer_draft.make_draft(checkpoint_dir, 4)), "--speculative_k", "auto"]
        before = {"PYTHONPATH": str(args.before.resolve())}
        configurations = [(checkpoint_dir, options, before), (checkpoint_dir, options)]
    elif args.compare == "batching":
        options += ["--prompt_lookup", str(args.prompt_lookup).lower(), "--max_seq_length", "512"]
        second = [*options, "--max_batch_size", str(args.max_batch_size)]
        configurations = [(checkpoint_dir, [*options, "--max_batch_size", "1"]), (checkpoint_dir, second)]
    else:
        if args.max_batch_size > 1:
            options += ["--max_batch_size", str(args.max_batch_size), "--max_seq_length", "512"]
        configurations = [(checkpoint_dir, options), (checkpoint_dir, [*options, "--prompt_lookup", "true"])]
    names = COMPARISONS[args.compare]
    with (
        tempfile.TemporaryDirectory() as log_dir,
        litgpt_server.serving(
            *configurations, log_dir=Path(log_dir), env={"OMP_NUM_THREADS": str(args.threads)}
        ) as started,
    ):
        servers = dict(zip(names, started))
        for server in started:  # the first request of a server is slower: not measured
            stream_request(server, tasks[0]["prompt"], args.new_tokens)
        llm = None
        if args.compare == "lookup":
            llm = LLM.load(str(checkpoint_dir), distribute=None)
            llm.distribute(accelerator="cpu", precision="32-true")
        records = measure(servers, llm, tasks, args.new_tokens, args.repeats, args.clients)
        metrics = requests.get(f"{servers[names[1]].url}/metrics", timeout=60).text
        peak_rss = {name: round(litgpt_server.peak_rss_mib(server)) for name, server in servers.items()}
    add_speeds(records)

    import litserve

    results = {
        "machine": run_machine(
            args,
            litserve=litserve.__version__,
            clients=args.clients,
            servers=names,
            max_batch_size=args.max_batch_size,
            prompt_lookup=args.prompt_lookup,
            draft=args.draft,
            peak_rss_mib=peak_rss,
        ),
        "tasks": tasks,
        "records": records,
        "metrics": metrics,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "serve.json").write_text(json.dumps(results, indent=1))
    (args.out / "serve.md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
