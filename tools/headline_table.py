"""The README's "Measured" table, computed from the committed benchmark results (so none can lack a results file).

    python -m tools.headline_table            # print the table
    python -m tools.headline_table --write    # replace it in README.md (rerun after committing new results)

One row per claim: the figure with its spread (quartiles over paired repeats, or the range over tasks), the command
that wrote the results file, and the machine it ran on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RESULTS = ROOT / "benchmarks" / "results" / "cpu"
START, END = "<!-- headline table: python -m tools.headline_table --write -->", "<!-- end of headline table -->"


def load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def ratio(values: list[float]) -> str:
    """A paired ratio over repeats: median (quartiles)."""
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return f"**{median:.2f}×** ({q1:.2f}–{q3:.2f})"


def machine_of(results: dict) -> str:
    machine = results["machine"]
    return f"CPU, {machine['threads']} thread(s), {machine['date']}"


def prompt_lookup_rows() -> list[tuple[str, ...]]:
    results = load("prompt_lookup.json")
    lookup, alone = "fork: prompt_lookup=True", "fork: target alone"

    def per_task(kind: str) -> list[float]:
        return [
            statistics.median(a / b for a, b in zip(task[lookup]["tokens_per_s"], task[alone]["tokens_per_s"]))
            for name, task in results["real"].items()
            if results["kinds"][name] == kind
        ]

    copy, open_ended = per_task("copy"), per_task("open")
    command, machine = f"`{results['machine']['command']}`", machine_of(results)
    return [
        (
            "`LLM.generate(prompt, prompt_lookup=True)` over the model alone, tokens/s, answers that copy from the"
            f" prompt ({len(copy)} tasks)",
            f"**{statistics.median(copy):.2f}×** (tasks {min(copy):.2f}–{max(copy):.2f})",
            command,
            machine,
        ),
        (
            f"The same, open-ended prompts ({len(open_ended)} tasks)",
            f"**{statistics.median(open_ended):.2f}×** (tasks {min(open_ended):.2f}–{max(open_ended):.2f})",
            command,
            machine,
        ),
    ]


def held_out_rows() -> list[tuple[str, ...]]:
    results = load("held_out/batch_generate.json")
    records = results["records"]

    def over(variant: str, baseline: str) -> list[float]:
        return [r["seconds"][baseline] / r["seconds"][variant] for r in records]

    command, machine = f"`{results['machine']['command']}`", machine_of(results)
    again = load("held_out_draft/batch_generate.json")  # the batch with and without the draft alone, more repeats
    batch_again = [r["seconds"]["batch"] / r["seconds"]["batch + draft"] for r in again["records"]]
    return [
        (
            "8 open chat prompts in no task set (tools/smollm2.py's), `LLM.generate` on the list at once over a loop"
            " of one prompt at a time",
            ratio(over("batch", "loop")),
            command,
            machine,
        ),
        (
            "The same prompts, prompt lookup over the same work without it: one at a time; in the batch",
            f"{ratio(over('loop + lookup', 'loop'))}; {ratio(over('batch + lookup', 'batch'))}",
            command,
            machine,
        ),
        (
            "The same prompts, SmolLM2's first 4 blocks as draft model, which cannot pay (`speculative_k='auto'`), over"
            " the same work without it: one at a time; in the batch; in the batch again, with and without the draft"
            f" only, {len(batch_again)} repeats",
            f"{ratio(over('loop + draft', 'loop'))}; {ratio(over('batch + draft', 'batch'))}; {ratio(batch_again)}",
            f"{command}; `{again['machine']['command']}`",
            machine,
        ),
    ]


def draft_model_rows() -> list[tuple[str, ...]]:
    results = load("results.json")
    machine = f"CPU, {results['machine']['torch_threads']} thread(s), {results['machine']['date']}"
    pair = results["pairs"][0]  # alpha = 1: the draft is the target's first layer, the other layers are no-ops
    paired = {
        row["k"]: [t / f for t, f in zip(pair["target"]["seconds_per_token"], row["fork"]["seconds_per_token"])]
        for row in pair["rows"]
    }
    k = max(paired, key=lambda k: statistics.median(paired[k]))
    return [
        (
            "`litgpt generate_speculatively`, a draft of 1 of 8 layers at α = 1 (a benchmark pair): tokens/s over the"
            " target alone, best k",
            f"{ratio(paired[k])}, k = {k}",
            "`python -m benchmarks.speculative_speed --compile`",
            machine,
        )
    ]


def per_prompt(ratios: dict[str, list[float]], prefix: str) -> str:
    """The median over the cases named `prefix...` of their paired ratios' medians, and their range."""
    medians = [statistics.median(v) for name, v in ratios.items() if name.startswith(prefix)]
    return f"**{statistics.median(medians):.2f}×** (prompts {min(medians):.2f}–{max(medians):.2f})"


def draft_head_rows() -> list[tuple[str, ...]]:
    results = load("draft_head.json")
    ratios = results["ratios"]

    training = results["training"]
    acceptance = results["acceptance"]["one prompt"]
    first = acceptance["per_position"][0] if acceptance["per_position"] else 0.0
    people = sum(name.startswith("greedy, ShareGPT") for name in ratios)
    offline = results.get("offline_acceptance") or [0.0]
    return [
        (
            f"A draft head trained by `litgpt train_draft` with its defaults ({training['tokens']:,} tokens of"
            f" ShareGPT, {(training['seconds'] + training['data_seconds']) / 60:.0f} min), people's prompts in no"
            " training data"
            f" (8 handwritten, {people} of ShareGPT's held-back split), `LLM.generate` with it over without: greedy one"
            " at a time; at temperature 0.7; a batch of 4; of 8; the first drafted token's acceptance live (offline)",
            f"{per_prompt(ratios, 'greedy')}; {per_prompt(ratios, 'temperature')}; {ratio(ratios['batch of 4'])};"
            f" {ratio(ratios['batch of 8'])}; {first:.2f} ({offline[0]:.2f})",
            f"`{results['machine']['command']}`",
            machine_of(results),
        )
    ]


def lookup_auto_rows() -> list[tuple[str, ...]]:
    results = load("draft_head_lookup.json")
    ratios = results["ratios"]

    people = sum(name.startswith("greedy, ShareGPT") for name in ratios)
    return [
        (
            f'Prompt lookup (`prompt_lookup=True`, `speculative_k="auto"`, its own prompt and answer only) on the'
            f" same open prompts (8 handwritten, {people} of ShareGPT's held-back split), `LLM.generate` with it over"
            " without: greedy one at a time; at temperature 0.7; a batch of 4; of 8",
            f"{per_prompt(ratios, 'greedy')}; {per_prompt(ratios, 'temperature')}; {ratio(ratios['batch of 4'])};"
            f" {ratio(ratios['batch of 8'])}",
            f"`{results['machine']['command']}`",
            machine_of(results),
        )
    ]


def onednn_rows() -> list[tuple[str, ...]]:
    results = load("onednn_linears.json")
    ratios = results["ratios"]
    one = [statistics.median(v) for name, v in ratios.items() if not name.startswith("batch")]
    passes = results["pass_ms"]
    over_step = {variant: passes[variant]["1"][3] / passes[variant]["1"][0] for variant in ("default", "oneDNN")}
    return [
        (
            "The model alone on the CPU, `LLM.generate` (float32, greedy), with oneDNN's linear layers (what every"
            " generation entry point now uses: packed weights, for any number of rows unless PyTorch's kernel is"
            " measured faster for 1 to 3) over PyTorch's default kernel: one prompt; a batch of 4; of 8; a pass over 4"
            " tokens, in steps",
            f"**{statistics.median(one):.2f}×** (prompts {min(one):.2f}–{max(one):.2f}); {ratio(ratios['batch of 4'])};"
            f" {ratio(ratios['batch of 8'])}; {over_step['oneDNN']:.2f} (was {over_step['default']:.2f})",
            f"`{results['machine']['command']}`",
            machine_of(results),
        )
    ]


def batch_ratios(*analyses: dict) -> list[str]:
    """The second server's aggregate tokens/s over the first's, per batch of 4 and of 8 requests sent at once, over
    the batches of all `analyses` (runs of the same comparison)."""
    cells = []
    for clients in (4, 8):
        walls = [v for a in analyses for key, v in a["batches"]["batch_wall_s"].items() if key[0] == clients]
        cells.append(f"{clients} clients {ratio(walls)}, {len(walls)} batches")
    return cells


def serve_batching_rows() -> list[tuple[str, ...]]:
    from benchmarks import serve

    results = load("serve_batching/serve.json")
    analysis = serve.analyse(results)
    cells = batch_ratios(analysis)
    return [
        (
            "`litgpt serve --max_batch_size 8` over `--max_batch_size 1`, aggregate tokens/s per batch of requests sent"
            f" at once; {analysis['requests'] - analysis['wrong']} of {analysis['requests']} answers equal",
            "; ".join(cells),
            f"`{results['machine']['command']}`",
            machine_of(results),
        )
    ]


def kv_memory_rows() -> list[tuple[str, ...]]:
    from benchmarks import serve

    memory = load("kv_memory/kv_memory.json")
    servers = memory["servers"]

    def idle(build: str) -> str:
        over = (
            servers[f"{build}, --max_batch_size 8"]["idle_group_mib"]
            - servers[f"{build}, --max_batch_size 1"]["idle_group_mib"]
        )
        return f"{over:+,.0f} MiB"

    waste = next(w for w in memory["waste"] if w["chunk"] == 16)
    builds, again = load("kv_builds/serve.json"), load("kv_builds_8/serve.json")  # again: 8 clients, 4 repeats
    analyses = [serve.analyse(builds), serve.analyse(again)]
    cells = batch_ratios(*analyses)
    requests = sum(a["requests"] for a in analyses)
    equal = requests - sum(a["wrong"] for a in analyses)
    return [
        (
            "`litgpt serve --max_batch_size 8` of the whole context (8,192 tokens), resident memory idle over"
            " `--max_batch_size 1`: KV caches reserved at start (before); following the requests (now); under 8"
            " clients, the bytes of the KV caches over those of the tokens they hold",
            f"before {idle('before')}; now **{idle('after')}**; **{waste['allocated_over_held_mean']:.2f}×**",
            f"`{memory['command']}`",
            machine_of(memory),
        ),
        (
            "KV caches that follow the requests over caches reserved at start, `litgpt serve --max_batch_size 8`,"
            f" aggregate tokens/s per batch of requests sent at once; {equal} of {requests} answers equal",
            "; ".join(cells),
            f"`{builds['machine']['command']}`; `{again['machine']['command']}`",
            machine_of(builds),
        ),
    ]


def engine_rows() -> list[tuple[str, ...]]:
    from benchmarks import serve

    api = load("engine_api/compare_builds_api.json")
    cells = [f"{row['case']} {ratio([1 / r for r in row['new_over_old']])}" for row in api["api"]]
    rows = [
        (
            "One engine: `LLM.generate(prompt)` through the continuous batching engine over the former single-request"
            f" path (the build of commit 39b8e03, see benchmarks/), paired per prompt (9 tasks); {api['differ']}"
            " answers differ",
            "; ".join(cells),
            f"`{api['command']}`",
            f"CPU, {api['threads']} thread(s)",
        )
    ]
    cells, commands = [], []
    for name in ("alone", "lookup", "draft"):
        results = load(f"engine_serve_{name}/serve.json")
        analysis = serve.analyse(results)
        speeds = [statistics.median(row["tokens_per_s"]) for row in analysis["rows"].values() if row["clients"] == 1]
        cells.append(f"{name} **{statistics.median(speeds):.2f}×** (requests {min(speeds):.2f}–{max(speeds):.2f})")
        commands.append(f"`{results['machine']['command']}`")
        machine = machine_of(results)
    rows.append(
        (
            "One engine: `litgpt serve --openai_spec true` at one client through the engine over the former path,"
            " tokens/s per request, paired",
            "; ".join(cells),
            "; ".join(commands),
            machine,
        )
    )
    return rows


def precision_rows() -> list[tuple[str, ...]]:
    results = load("precision.json")
    pairs = len({row["pair"] for row in results["rows"]})
    cells = []
    for dtype in ("float32", "bfloat16"):
        rows = [row for row in results["rows"] if row["dtype"] == dtype]
        cells.append(f"{dtype} **{sum(r['identical'] for r in rows)}/{sum(r['prompts'] for r in rows)}**")
    return [
        (
            f"Greedy speculative output token for token the target alone's ({pairs} pairs incl. the real model,"
            f" {results['rows'][0]['prompts']} prompts each)",
            ", ".join(cells),
            "`python -m benchmarks.greedy_precision`",
            f"CPU, {results['machine']['date']}",
        )
    ]


def vllm_bench_rows(name: str = "vllm_bench") -> list[tuple[str, ...]]:
    results = load(f"{name}/vllm_bench.json")
    runs = results["runs"]

    def paired(concurrency: int, metric: str) -> list[float]:
        """The fork's `metric` over vLLM's, repeat by repeat."""
        of = {(run["server"], run["repeat"]): run[metric] for run in runs if run["concurrency"] == concurrency}
        return [of["fork", r] / of["vllm", r] for s, r in of if s == "fork" and ("vllm", r) in of]

    from benchmarks import vllm_bench

    counts = [vllm_bench.same_answers(runs, concurrency) for concurrency in results["machine"]["concurrency"]]
    same, compared = map(sum, zip(*counts))
    cells = []
    for concurrency in results["machine"]["concurrency"]:
        speed, tpot = paired(concurrency, "output_throughput"), paired(concurrency, "median_tpot_ms")
        cells.append(
            f"{concurrency}: **{statistics.median(speed):.2f}×** ({min(speed):.2f}–{max(speed):.2f}),"
            f" TPOT {statistics.median(tpot):.2f}×"
        )
    return [
        (
            "`vllm bench serve` (ShareGPT conversations, streamed, greedy) against `litgpt serve --openai_spec true"
            f" --max_batch_size 16{' --compile true' if results['machine'].get('compile') else ''}` and `vllm serve` on"
            " the same weights, in"
            f" {results['machine'].get('dtype', 'float32')}: the fork's output tokens/s over"
            f" vLLM's, and its median time per output token over vLLM's, per number of clients; {same} of {compared}"
            " answers the same text from both"
            + (
                "; both proposing tokens looked up in the conversation (the fork's prompt lookup, vLLM's n-gram"
                " proposer)"
                if results["machine"].get("lookup")
                else ""
            ),
            "; ".join(cells),
            f"`{results['machine']['command']}`",
            machine_of(results),
        )
    ]


def vllm_bench_compiled_rows() -> list[tuple[str, ...]]:
    """`litgpt serve --compile true` over the same server uncompiled (runs of the fork alone), and over vLLM's run."""
    compiled, uncompiled = load("vllm_bench_compiled/vllm_bench.json"), load("vllm_bench_uncompiled/vllm_bench.json")
    vllm = load("vllm_bench_compile_before_fix/vllm_bench.json")

    def of(results: dict, server: str, concurrency: int) -> dict:
        return next(run for run in results["runs"] if run["server"] == server and run["concurrency"] == concurrency)

    cells, same, compared = [], 0, 0
    for concurrency in compiled["machine"]["concurrency"]:
        run, before = of(compiled, "fork", concurrency), of(uncompiled, "fork", concurrency)
        same += sum(a == b for a, b in zip(run["texts"], before["texts"]))
        compared += len(run["texts"])
        speed = run["output_throughput"] / before["output_throughput"]
        over_vllm = run["output_throughput"] / of(vllm, "vllm", concurrency)["output_throughput"]
        cells.append(f"{concurrency}: **{speed:.2f}×** ({over_vllm:.2f}× vLLM)")
    return [
        (
            "`vllm bench serve` (as above, float32) against `litgpt serve --openai_spec true --max_batch_size 16"
            " --compile true` over the same server uncompiled, output tokens/s per number of clients, one run each;"
            f" {same} of {compared} answers the same; and over vLLM's run of the same day",
            "; ".join(cells),
            f"`{compiled['machine']['command']}`; without `--compile`: `{uncompiled['machine']['command']}`; vLLM:"
            f" `{vllm['machine']['command']}`",
            machine_of(compiled),
        )
    ]


def table() -> str:
    lines = ["| what | measured | command | machine |", "|---|---|---|---|"]
    rows = onednn_rows() + prompt_lookup_rows() + held_out_rows() + draft_head_rows() + lookup_auto_rows()
    rows += draft_model_rows()
    rows += serve_batching_rows() + kv_memory_rows() + vllm_bench_rows() + vllm_bench_rows("vllm_bench_lookup")
    rows += vllm_bench_rows("vllm_bench_bf16") + vllm_bench_compiled_rows()
    rows += vllm_bench_rows("vllm_bench_lookup_compiled")
    for row in rows + engine_rows() + precision_rows():
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="replace the table between the markers in README.md")
    args = parser.parse_args(argv)
    if not args.write:
        print(table())
        return 0
    text = README.read_text()
    if text.count(START) != 1 or text.count(END) != 1:
        print(f"error: README.md must contain the markers {START!r} and {END!r} once each", file=sys.stderr)
        return 2
    head, rest = text.split(START)
    _, tail = rest.split(END)
    README.write_text(f"{head}{START}\n{table()}\n{END}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
