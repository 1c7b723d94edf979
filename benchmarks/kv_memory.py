"""The memory of `litgpt serve` with continuous batching: idle, and under 8 concurrent requests, for two builds; and
how much of the KV cache the engine allocates over the tokens it holds.

    python -m benchmarks.kv_memory --before /tmp/old/tree --threads 2 --out benchmarks/results/cpu/kv_memory

Servers: SmolLM2-135M-Instruct (tools/smollm2.py), float32, `--openai_spec true`, the model's whole context (no
`--max_seq_length`), `--max_batch_size 1` and `8`, of the build in `--before` (a patched tree put first on the
server's PYTHONPATH) and of the installed one. For each: the resident memory of its processes (the process group,
and its largest process, the inference worker) once healthy; then, on the servers of `--max_batch_size 8`, 8 clients
that each send `--requests` chat requests one after the other (the prompts of benchmarks/prompt_lookup_tasks.json, up
to 128 new tokens, greedy), the peak of the worker (VmHWM) and its memory once they are answered.

In this process, the same requests through `LLM.generate` (a list, `max_batch_size=8`, the engine the server runs) with
every round recorded: the bytes of the KV caches allocated, and the bytes of the tokens the rows hold (their prompts and
the tokens generated so far). The waste is 1 - held / allocated over the rounds (vLLM reports its KV cache usage as the
share of the blocks allocated to sequences; here, of the memory allocated), for `--chunks` sizes of growth; beside it,
what rows of the longest row's length would take exactly (the least a dense layout can take), and what blocks of 16
tokens would (a paged layout).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import torch
from litgpt import LLM
from litgpt.generate import continuous_batching
from litgpt.generate.kv_memory import KVMemory

from benchmarks.report import command_line
from harness import litgpt_server
from tools import smollm2

ROOT = Path(__file__).resolve().parent.parent

TASKS = ROOT / "benchmarks" / "prompt_lookup_tasks.json"


def chat(server: litgpt_server.Server, prompt: str, new_tokens: int) -> str:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="not needed", max_retries=0, timeout=3600)
    messages = [{"role": "user", "content": prompt}]
    reply = client.chat.completions.create(model="SmolLM2", messages=messages, temperature=0, max_tokens=new_tokens)
    return reply.choices[0].message.content


def waste(llm: LLM, prompts: list[str], new_tokens: int, chunk: int) -> dict:
    """The KV caches allocated and the tokens held over the rounds of `LLM.generate(prompts)` at batch 8."""
    KVMemory.chunk = chunk
    rounds = []
    step = continuous_batching.ContinuousBatch.step

    def recorded(batch, *args, **kwargs):
        per_token = sum(memory.token_bytes for memory in batch.memories)
        finished = step(batch, *args, **kwargs)
        lengths = [len(row.text) for row in batch.rows + finished]
        allocated = sum(memory.nbytes for memory in batch.memories)
        dense = len(lengths) * max(lengths) * per_token  # rows of the longest row's length, nothing rounded
        paged = sum(-(-n // 16) * 16 for n in lengths) * per_token  # blocks of 16 tokens
        rounds.append((allocated, sum(lengths) * per_token, len(lengths), dense, paged))
        return finished

    continuous_batching.ContinuousBatch.step = recorded
    try:
        llm.generate(prompts, max_new_tokens=new_tokens, temperature=0, max_batch_size=8)
    finally:
        continuous_batching.ContinuousBatch.step = step
        KVMemory.chunk = 16
    full = [(a, h) for a, h, rows, _, _ in rounds if rows == 8]  # rounds with all 8 rows taken
    held = sum(h for a, h, rows, _, _ in rounds if rows == 8)
    return {
        "dense_exact_over_held": sum(d for _, _, rows, d, _ in rounds if rows == 8) / held,
        "paged_16_over_held": sum(p for _, _, rows, _, p in rounds if rows == 8) / held,
        "chunk": chunk,
        "rounds": len(rounds),
        "rounds_of_8": len(full),
        "allocated_over_held_mean": sum(a for a, _ in full) / sum(h for _, h in full),
        "allocated_over_held_median": statistics.median(a / h for a, h in full),
        "allocated_over_held_max": max(a / h for a, h in full),
        "allocated_mib_max": max(r[0] for r in rounds) / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="a tree holding the first build's litgpt")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--requests", type=int, default=2, help="per client")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument(
        "--chunks", type=int, nargs="+", default=[16, 64], help="KVMemory.chunk: the fewest tokens a step"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu" / "kv_memory")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tasks = json.loads(TASKS.read_text())["tasks"]
    prompts = [tasks[i % len(tasks)]["prompt"] for i in range(8 * args.requests)]
    checkpoint_dir = smollm2.make_checkpoint(ROOT / "build" / "smollm2")
    options = ["--openai_spec", "true", "--accelerator", "cpu", "--precision", "32-true", "--timeout", "3600"]
    before = {"PYTHONPATH": str(args.before.resolve())}
    configurations = {
        "before, --max_batch_size 1": (checkpoint_dir, [*options, "--max_batch_size", "1"], before),
        "before, --max_batch_size 8": (checkpoint_dir, [*options, "--max_batch_size", "8"], before),
        "after, --max_batch_size 1": (checkpoint_dir, [*options, "--max_batch_size", "1"]),
        "after, --max_batch_size 8": (checkpoint_dir, [*options, "--max_batch_size", "8"]),
    }
    machine = {"date": datetime.date.today().isoformat(), "threads": args.threads, "command": command_line()}
    results = {"command": command_line(), "machine": machine, "servers": {}}
    with (
        tempfile.TemporaryDirectory() as log_dir,
        litgpt_server.serving(
            *configurations.values(), log_dir=Path(log_dir), env={"OMP_NUM_THREADS": str(args.threads)}
        ) as started,
    ):
        servers = dict(zip(configurations, started))
        for name, server in servers.items():
            results["servers"][name] = {
                "idle_group_mib": litgpt_server.rss_mib(server),
                "idle_worker_mib": litgpt_server.worker_mib(server),
            }
        answers = {}
        for name in ("before, --max_batch_size 8", "after, --max_batch_size 8"):
            server = servers[name]
            with ThreadPoolExecutor(max_workers=8) as pool:
                answers[name] = list(pool.map(lambda p: chat(server, p, args.new_tokens), prompts))
            results["servers"][name] |= {
                "loaded_peak_worker_mib": litgpt_server.worker_mib(server, "VmHWM"),
                "after_load_worker_mib": litgpt_server.worker_mib(server),
            }
        results["same_answers"] = answers["before, --max_batch_size 8"] == answers["after, --max_batch_size 8"]
    llm = LLM.load(str(checkpoint_dir), distribute=None)
    llm.distribute(accelerator="cpu", precision="32-true")
    chat_prompts = [llm.prompt_style.apply(p) for p in prompts]
    results["waste"] = [waste(llm, chat_prompts, args.new_tokens, chunk) for chunk in args.chunks]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kv_memory.json").write_text(json.dumps(results, indent=1))
    lines = [
        "# litgpt serve's memory, SmolLM2-135M-Instruct float32, the whole context (8,192 tokens)",
        "",
        f"    {results['command']}",
        "",
        "| server | idle, all processes (MiB) | idle, worker (MiB) | worker's peak under 8 clients (MiB) |"
        " worker after (MiB) |",
        "|---|---|---|---|---|",
    ]
    for name, r in results["servers"].items():
        lines.append(
            f"| {name} | {r['idle_group_mib']:,.0f} | {r['idle_worker_mib']:,.0f} |"
            f" {r.get('loaded_peak_worker_mib', float('nan')):,.0f} |"
            f" {r.get('after_load_worker_mib', float('nan')):,.0f} |"
        )
    lines += [
        "",
        f"Answers of the two builds' batch-8 servers equal: {results['same_answers']}",
        "",
        f"KV caches allocated over the tokens held, `LLM.generate` of the {len(prompts)} requests at batch 8, rounds"
        " with 8 rows:",
        "",
        "| KVMemory.chunk (tokens) | rounds | allocated / held, over all rounds | median round | worst round |"
        " most allocated (MiB) | rows of the longest row, exactly / held | paged, blocks of 16 / held |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for w in results["waste"]:
        lines.append(
            f"| {w['chunk']} | {w['rounds_of_8']} of {w['rounds']} | {w['allocated_over_held_mean']:.3f} |"
            f" {w['allocated_over_held_median']:.3f} | {w['allocated_over_held_max']:.3f} |"
            f" {w['allocated_mib_max']:.1f} |"
            f" {w['dense_exact_over_held']:.3f} | {w['paged_16_over_held']:.3f} |"
        )
    (args.out / "kv_memory.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
