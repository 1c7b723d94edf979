"""The README's headline numbers, computed from the committed benchmark results (so none can lack a results file).

    python tools/headline_table.py            # print the table
    python tools/headline_table.py --write    # replace it in README.md (rerun after committing new results)

Each row names the command that produced its results file and the machine it ran on. Spreads are over repeats
(interleaved, paired repeat by repeat where a ratio is given) or over the tasks of a task set, as the row says.
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
START, END = "<!-- headline table: python tools/headline_table.py --write -->", "<!-- end of headline table -->"


def load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def provenance(results: dict) -> tuple[str, str]:
    """The command and the machine columns of a results file that records its command and threads."""
    machine = results["machine"]
    return f"`{machine['command']}`", f"CPU, {machine['threads']} thread(s), {machine['date']}"


def quartiles(values: list[float]) -> str:
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return f"**{median:.2f}×** (quartiles {q1:.2f}–{q3:.2f})"


def prompt_lookup_rows() -> list[tuple[str, str, str, str]]:
    results = load("prompt_lookup.json")
    command, machine = provenance(results)

    def per_task(kind: str, variant: str, baseline: str) -> list[float]:
        return [
            statistics.median(a / b for a, b in zip(task[variant]["tokens_per_s"], task[baseline]["tokens_per_s"]))
            for name, task in results["real"].items()
            if results["kinds"][name] == kind and baseline in task
        ]

    lookup, alone = "fork: prompt_lookup=True", "fork: target alone"
    copy, open_ended = per_task("copy", lookup, alone), per_task("open", lookup, alone)
    rows = [
        (
            "One checkpoint, `prompt_lookup=True`, answers that copy from the prompt (SmolLM2-135M-Instruct, greedy,"
            f" float32): tokens/s over the target alone, {len(copy)} tasks",
            f"**{statistics.median(copy):.2f}×** (tasks {min(copy):.2f}–{max(copy):.2f})",
            command,
            machine,
        ),
        (
            f"The same, open-ended prompts ({len(open_ended)} tasks; the lowest is the one whose answer repeats least)",
            f"**{min(open_ended):.2f}×** lowest (tasks {min(open_ended):.2f}–{max(open_ended):.2f})",
            command,
            machine,
        ),
    ]
    transformers = per_task("copy", lookup, "transformers: prompt_lookup_num_tokens=10")
    if transformers:
        rows.append(
            (
                "The same copy tasks: the fork's lookup over transformers' `prompt_lookup_num_tokens=10`",
                f"**{statistics.median(transformers):.2f}×** (tasks {min(transformers):.2f}–{max(transformers):.2f})",
                command,
                machine,
            )
        )
    return rows


def draft_model_rows() -> list[tuple[str, str, str, str]]:
    results = load("results.json")
    machine = f"CPU, {results['machine']['torch_threads']} thread(s), {results['machine']['date']}"
    pair = results["pairs"][0]  # alpha = 1: the draft is the target's first layer, the other layers are no-ops

    def best(fork: str, target: str) -> tuple[int, list[float]]:
        """The k with the highest median speedup, paired repeat by repeat, and those speedups."""
        paired = {
            row["k"]: [t / f for t, f in zip(pair[target]["seconds_per_token"], row[fork]["seconds_per_token"])]
            for row in pair["rows"]
        }
        k = max(paired, key=lambda k: statistics.median(paired[k]))
        return k, paired[k]

    (k, eager), (compiled_k, compiled) = best("fork", "target"), best("compiled fork", "compiled target")
    return [
        (
            f"A draft model (benchmark pair at α = 1, draft = 1 of 8 layers): tokens/s over the target alone, best k,"
            f" {len(eager)} paired repeats; compiled: over the compiled target alone",
            f"{quartiles(eager)}, k = {k}; compiled {quartiles(compiled)}, k = {compiled_k}",
            "`python benchmarks/speculative_speed.py --compile`",
            machine,
        )
    ]


def compile_rows() -> list[tuple[str, str, str, str]]:
    results = load("compile_cli.json")
    runs = results["runs"]
    ratios = [
        statistics.median(spec[1:]) / statistics.median(alone[1:])  # samples 2-4: the steady state
        for spec, alone in zip(runs["speculative, k = 4, compiled"], runs["target alone, compiled"])
    ]
    machine = f"CPU, {results['machine']['torch_threads']} thread(s), {results['machine']['date']}"
    return [
        (
            f"`--compile` on the demo's tiny pair: compiled k = 4 over the compiled target alone ({len(ratios)} paired"
            " repeats)",
            quartiles(ratios) if len(ratios) >= 2 else f"**{ratios[0]:.2f}×**",
            f"`{results.get('command', f'python benchmarks/compile_cli.py --repeats {len(ratios)}')}`",
            machine,
        )
    ]


def precision_rows() -> list[tuple[str, str, str, str]]:
    results = load("precision.json")
    machine = f"CPU, {results['machine']['date']}"
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
            "`python benchmarks/greedy_precision.py`",
            machine,
        )
    ]


def serve_rows() -> list[tuple[str, str, str, str]]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import serve

    results = load("serve.json")
    command, machine = provenance(results)
    analysis = serve.analyse(results)

    def medians(clients: int, kind: str, field: str) -> list[float]:
        rows = [row for row in analysis["rows"].values() if row["clients"] == clients and row["kind"] == kind]
        return [statistics.median(row[field]) if isinstance(row[field], list) else row[field] for row in rows]

    def cell(values: list[float], which: str = "median") -> str:
        value = statistics.median(values) if which == "median" else min(values)
        return f"**{value:.2f}×** ({which}; requests {min(values):.2f}–{max(values):.2f})"

    return [
        (
            "`litgpt serve --openai_spec true --prompt_lookup true`, chat requests that copy from the prompt"
            " (SmolLM2-135M-Instruct, greedy, streamed to the `openai` client): tokens/s over the same server without"
            f" lookup, paired per request; all {analysis['requests'] - analysis['wrong']} of {analysis['requests']}"
            " answers equal",
            f"1 client {cell(medians(1, 'copy', 'tokens_per_s'))};"
            f" 4 clients {cell(medians(4, 'copy', 'tokens_per_s'))}",
            command,
            machine,
        ),
        (
            "The same servers, open requests (tokens/s, lowest request); time to first token with lookup over without"
            " (1 client, all requests)",
            f"1 client {cell(medians(1, 'open', 'tokens_per_s'), 'lowest')}; 4 clients"
            f" {cell(medians(4, 'open', 'tokens_per_s'), 'lowest')}; first token"
            f" {cell([1 / m for k in ('copy', 'open') for m in medians(1, k, 'ttft')])}",
            command,
            machine,
        ),
        (
            "The server's gain in latency over `LLM.generate`'s gain in seconds on the same prompt (prompt lookup"
            " over none), 1 client, paired per repeat",
            cell(medians(1, "copy", "of_api_gain") + medians(1, "open", "of_api_gain")),
            command,
            machine,
        ),
    ]


def lookup_workload_rows(name: str = "lookup_workload") -> list[tuple[str, str, str, str]]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import lookup_workload

    results = load(f"{name}.json")
    command, machine = provenance(results)
    rows = lookup_workload.analyse(results)
    repetitive = [r for r in rows if r["index"] >= 2 and r["workload"] != "unrelated requests"]
    unrelated = [r for r in rows if r["workload"] == "unrelated requests"]
    identical = sum(r["identical"] for r in rows)

    def cell(selected: list[dict], field: str, which: str = "median") -> str:
        values = [statistics.median(r[field]) for r in selected]
        value = statistics.median(values) if which == "median" else min(values)
        return f"**{value:.2f}×** ({which}; requests {min(values):.2f}–{max(values):.2f})"

    names = ", ".join(dict.fromkeys(r["workload"] for r in repetitive))
    if results["machine"].get("server"):
        what = (
            "`litgpt serve --openai_spec true --prompt_lookup true` looking up the worker's earlier answers, the same"
            f" sequences ({names}; from the third request on) sent with the `openai` client: tokens/s over"
            f" `--lookup_cache_tokens 0`, and over the server without lookup; {identical} of {len(rows)} requests'"
            " answers equal the server without lookup's"
        )
    else:
        what = (
            f"`prompt_lookup=True` looking up earlier generations, sequences of requests of one kind ({names};"
            " from the third request on) through one `LLM`: tokens/s over prompt-only lookup"
            f" (`lookup_cache_tokens=0`), and over the target alone; {identical} of {len(rows)} requests' outputs"
            " equal the target alone's"
        )
    return [
        (
            what,
            f"{cell(repetitive, 'earlier / prompt only')}; over alone {cell(repetitive, 'earlier / alone')}",
            command,
            machine,
        ),
        (
            "The same, unrelated requests in a row (the prompt lookup tasks and the README's former first example)",
            f"over prompt-only {cell(unrelated, 'earlier / prompt only', 'lowest')}; over alone"
            f" {cell(unrelated, 'earlier / alone', 'lowest')}",
            command,
            machine,
        ),
    ]


def table() -> str:
    lines = ["| what | measured | command | machine |", "|---|---|---|---|"]
    rows = prompt_lookup_rows() + lookup_workload_rows() + lookup_workload_rows("lookup_workload_serve") + serve_rows()
    for row in rows + draft_model_rows() + compile_rows() + precision_rows():
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
