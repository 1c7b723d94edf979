"""The benchmark's results as Markdown tables and a plot."""

from __future__ import annotations

import datetime
import json
import shlex
import statistics
import sys
from pathlib import Path


def command_line() -> str:
    """The command that ran this benchmark, quoted as a shell takes it again from the repository's root."""
    return shlex.join(["python", "-m", f"benchmarks.{Path(sys.argv[0]).stem}", *sys.argv[1:]])


def run_machine(args, **more) -> dict:
    """What a results file records of its run: the date, the device, torch's version, the benchmark's `--threads`,
    `--repeats` and `--new-tokens`, `more`, and the command."""
    import platform

    import torch

    return {
        "date": datetime.date.today().isoformat(),
        "device": platform.processor() or "cpu",
        "torch": torch.__version__,
        "threads": args.threads,
        "repeats": getattr(args, "repeats", None),
        "new_tokens": args.new_tokens,
        **more,
        "command": command_line(),
    }


def write_results(out: Path, results: dict, markdown: str) -> None:
    """Writes `out`.json (the results) and `out`.md (their Markdown), and prints the Markdown."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    out.with_suffix(".md").write_text(markdown)
    print(markdown)


def _speed(entry: dict | None) -> str:
    return "–" if entry is None else f"{entry['tokens_per_s']:.1f} ±{entry['spread'] / 2:.0%}"


def _ratio(a: dict, b: dict) -> str:
    return f"{a['tokens_per_s'] / b['tokens_per_s']:.2f}"


def _ks(ks: list[int]) -> str:
    """A k trajectory, runs shortened: 4, 8 ×14, 0 ×64, 3."""
    runs: list[list[int]] = []
    for k in ks:
        if runs and runs[-1][0] == k:
            runs[-1][1] += 1
        else:
            runs.append([k, 1])
    return ", ".join(f"{k} ×{n}" if n > 1 else str(k) for k, n in runs)


def best(pair: dict, prefix: str = "") -> tuple[str, float]:
    """The fastest of every fixed k and the target alone, and its speedup."""
    options = {f"k = {row['k']}": row[f"{prefix}fork"]["speedup"] for row in pair["rows"]}
    options["target alone"] = 1.0
    name = max(options, key=options.get)
    return name, options[name]


def held_out_times(pair: dict, prefix: str = "") -> list[float] | None:
    """Per repeat, the seconds per token of the best fixed choice, chosen without that repeat.

    For each repeat, the option with the fastest median over the other repeats, timed in this repeat. The fastest
    median itself picks the luckiest of nine noisy options, and so overstates the best.
    """
    options = [row[f"{prefix}fork"]["seconds_per_token"] for row in pair["rows"]]
    options.append(pair[f"{prefix}target"]["seconds_per_token"])
    repeats = len(options[0])
    if repeats < 2:
        return None
    held_out = []
    for r in range(repeats):
        others = [statistics.median(times[:r] + times[r + 1 :]) for times in options]
        held_out.append(options[others.index(min(others))][r])
    return held_out


def held_out_best(pair: dict, prefix: str = "") -> float | None:
    """The speedup of the best fixed choice held out (see `held_out_times`): the median over repeats."""
    held_out = held_out_times(pair, prefix)
    if held_out is None:
        return None
    return statistics.median(pair[f"{prefix}target"]["seconds_per_token"]) / statistics.median(held_out)


def paired_ratios(pair: dict, what: str, prefix: str = "") -> list[float] | None:
    """Per repeat, the speed of `what` over that of the best fixed choice held out, both timed in that repeat.

    A repeat that ran slow for all choices (the machine was busy) slows both, and the ratio keeps less of that noise
    than a ratio of medians over all repeats.
    """
    held_out = held_out_times(pair, prefix)
    if held_out is None:
        return None
    return [h / a for h, a in zip(held_out, pair[f"{prefix}{what}"]["seconds_per_token"])]


def write_pairs(
    out: Path | None, name: str, title: str, command: str, setup: str, columns: list[str], rows: list[dict], cells
) -> None:
    """Prints the table of a benchmark of interleaved pairs (a row per measured shape: `cells(row)`, the summary of
    its paired `ratios` and the median milliseconds of its `seconds`) and, with `out`, writes it to OUT/NAME.md and
    the rows to OUT/NAME.json."""
    pairs = len(rows[0]["ratios"])
    lines = [
        f"# {title} ({datetime.date.today()})",
        "",
        f"`{command}`: {setup}; median (quartiles) over {pairs} interleaved pairs.",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
        *(f"| {cells(r)} | {summary(r['ratios'])} | {1000 * statistics.median(r['seconds']):.1f} |" for r in rows),
    ]
    print("\n".join(lines))
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.json").write_text(json.dumps({"command": command, "rows": rows}, indent=1))
        (out / f"{name}.md").write_text("\n".join(lines) + "\n")


def summary(values: list[float]) -> str:
    """Paired ratios or speeds over repeats as "median (quartiles)", or the one value of a single repeat."""
    if len(values) < 2:
        return f"{values[0]:.2f}"
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return f"{median:.2f} ({q1:.2f}–{q3:.2f})"


def _median_and_quartiles(values: list[float] | None) -> str:
    if not values:
        return "–"
    q1, _, q3 = statistics.quantiles(values, n=4)  # held_out_times gives None for fewer than 2 repeats
    return f"{statistics.median(values):.3f} [{q1:.2f}–{q3:.2f}]"


def markdown_pair(pair: dict) -> str:
    compiled = "compiled target" in pair
    hf = "transformers alone" in pair
    head = (
        f"\n### α = {pair['alpha']:.2f} (noise {pair['noise']}): c = {pair['c']:.3f}, LitGPT target-only "
        f"{_speed(pair['target'])} tokens/s"
        + (f", compiled {_speed(pair['compiled target'])}" if compiled else "")
        + (f", transformers target-only {_speed(pair['transformers alone'])}" if hf else "")
        + "\n\n| k | v(k+1) | bound | fork tok/s | speedup | efficiency | accepted | identical "
        + ("| compiled fork tok/s | speedup over compiled target | identical " if compiled else "")
        + ("| transformers tok/s | fork/transformers speed " if hf else "")
        + "|\n|"
        + "---|" * (8 + 3 * compiled + 2 * hf)
        + "\n"
    )
    lines = []
    for row in pair["rows"]:
        fork = row["fork"]
        line = (
            f"| {row['k']} | {row['v']:.2f} | {row['bound']:.2f} | {_speed(fork)} | {fork['speedup']:.2f} "
            f"| {row['efficiency']:.2f} | {fork['acceptance_rate']:.2f} | {fork['identical']} "
        )
        if compiled:
            cfork = row["compiled fork"]
            line += f"| {_speed(cfork)} | {cfork['speedup']:.2f} | {cfork['identical']} "
        if hf:
            line += (
                f"| {_speed(row['transformers'])} | {fork['tokens_per_s'] / row['transformers']['tokens_per_s']:.2f} "
            )
        lines.append(line + "|")
    default = pair.get("transformers default")
    for what, label in (("auto", "auto"), ("auto kept", "auto, kept")):
        auto = pair[what]
        lines.append(
            f"| {label} | | | {_speed(auto)} | {auto['speedup']:.2f} | | {auto['acceptance_rate']:.2f} "
            f"| {auto['identical']} "
            + (
                f"| {_speed(pair['compiled ' + what])} | {pair['compiled ' + what]['speedup']:.2f} "
                f"| {pair['compiled ' + what]['identical']} "
                if compiled
                else ""
            )
            + (f"| {_speed(default)} (its default) | {_ratio(auto, default)} " if hf else "")
            + "|"
        )
    return head + "\n".join(lines)


def markdown_summary(results: dict) -> str:
    compiled = "compiled target" in results["pairs"][0]
    hf = "transformers default" in results["pairs"][0]
    lines = [
        "| α | | best of fixed k and target alone | best, held out | auto | auto / best | auto / held out "
        "| auto / held out, paired | auto, kept | kept / best | kept / held out | kept / held out, paired "
        + ("| transformers default | transformers heuristic | auto / transformers default " if hf else "")
        + "|",
        "|" + "---|" * (12 + 3 * hf),
    ]
    for pair in results["pairs"]:
        for prefix in ("", "compiled ") if compiled else ("",):
            name, speedup = best(pair, prefix)
            held_out = held_out_best(pair, prefix)
            line = f"| {pair['alpha']:.2f} | {prefix.strip() or 'eager'} | {speedup:.2f} ({name}) "
            line += f"| {held_out:.2f} " if held_out else "| – "
            for what in ("auto", "auto kept"):
                auto = pair[f"{prefix}{what}"]["speedup"]
                line += f"| {auto:.2f} | {auto / speedup:.3f} "
                line += f"| {auto / held_out:.3f} " if held_out else "| – "
                line += f"| {_median_and_quartiles(paired_ratios(pair, what, prefix))} "
            if hf:
                default, heuristic = pair["transformers default"], pair["transformers heuristic"]
                line += f"| {default['speedup']:.2f} | {heuristic['speedup']:.2f} | {_ratio(pair['auto'], default)} "
            lines.append(line + "|")
    return "\n".join(lines)


def markdown_trajectories(results: dict) -> str:
    lines = []
    for pair in results["pairs"]:
        for what, ks in pair["auto_ks"].items():
            lines.append(f"- α = {pair['alpha']:.2f}, {what} (last repeat): {_ks(ks)}")
    return "\n".join(lines)


def markdown_overhead(rows: list[dict]) -> str:
    lines = [
        "\n### Loop overhead per round, with models that cost nothing (fixed logits; sampled, same seeds)\n",
        "| k | fork (ms) | 0.5.13 (ms) | fork/0.5.13 |",
        "|---|---|---|---|",
    ]
    lines += [f"| {r['k']} | {r['fork']:.3f} | {r['0.5.13']:.3f} | {r['fork'] / r['0.5.13']:.3f} |" for r in rows]
    return "\n".join(lines)


def markdown(results: dict) -> str:
    m, setup = results["machine"], results["setup"]
    return "\n".join(
        [
            f"# Speculative decoding speed, {m['date']}",
            "",
            f"Machine: {m['platform']}, {m['device']}, {m['torch_threads']} torch threads; torch {m['torch']}, "
            f"litgpt {m['litgpt']}, transformers {m['transformers']}, Python {m['python']}. Precision "
            f"{m['precision']}{', compiled as --compile does' if m['compile'] else ''}. Target: {results['config']} "
            f"(GPT-NeoX/Pythia layout){', ' + str(setup['n_layer']) + ' layers' if setup['n_layer'] else ''}"
            f"{', vocabulary ' + str(setup['vocab']) if setup['vocab'] else ''}; draft: its first layer, embeddings "
            f"and head. Prompt {setup['prompt_len']} tokens, {setup['new_tokens']} new tokens, greedy, median of "
            f"{setup['repeats']} interleaved repeats (± is half the min–max spread).",
            "",
            "α is how often the draft's greedy token is the target's along the target's output; c and v(k+1) are "
            "measured forward costs in target forwards; bound = Leviathan et al. 2023's expected speedup with them; "
            "efficiency = speedup / bound. Speedups are over LitGPT's target-only decoding (compiled columns: over "
            "the compiled target-only decoding). 'identical' counts the runs whose tokens equal the target-only "
            "output. transformers runs assisted generation on the same weights, with k assistant tokens per round, "
            "or its own defaults. 'auto' starts each generation with a new AutoSpeculativeK, as a single "
            "generation does; 'auto, kept' goes on with one AutoSpeculativeK over the generations of the pair (the "
            "first of them included), as `--num_samples` and `LLM.generate` do.",
            "",
            "## Summary: auto against the best fixed choice",
            "",
            "'best, held out': for each repeat, the choice fastest in the other repeats, timed in this one (median "
            "over repeats); the fastest median alone picks the luckiest of nine noisy choices and overstates the best. "
            "'paired': the median and quartiles over repeats of auto's speed over the held-out best's in the same "
            "repeat (a repeat that ran slow for every choice then counts less).",
            "",
            markdown_summary(results),
            "",
            "## The k that auto chose, step by step (0: a step of the target alone)",
            "",
            markdown_trajectories(results),
            "",
            "## Per acceptance rate",
            *(markdown_pair(p) for p in results["pairs"]),
            markdown_overhead(results["loop_overhead"]) if "loop_overhead" in results else "",
            "",
            "![speedup vs k](speedup.png)",
            "",
        ]
    )


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = results["pairs"]
    fig, axes = plt.subplots(1, len(pairs), figsize=(4.2 * len(pairs), 3.8), sharey=True, squeeze=False)
    for ax, pair in zip(axes[0], pairs):
        ks = [r["k"] for r in pair["rows"]]
        ax.plot(ks, [r["bound"] for r in pair["rows"]], "k--", label="bound (measured c, v)")
        ax.plot(ks, [r["fork"]["speedup"] for r in pair["rows"]], "o-", color="C0", label="fork, k")
        ax.axhline(pair["auto"]["speedup"], color="C0", lw=1.5, ls="-.", label="fork, auto")
        ax.axhline(pair["auto kept"]["speedup"], color="C0", lw=1.0, ls="--", label="fork, auto kept")
        if "compiled target" in pair:
            ax.plot(ks, [r["compiled fork"]["speedup"] for r in pair["rows"]], "s-", color="C2", label="compiled, k")
            ax.axhline(pair["compiled auto"]["speedup"], color="C2", lw=1.5, ls="-.", label="compiled, auto")
            ax.axhline(pair["compiled auto kept"]["speedup"], color="C2", lw=1.0, ls="--", label="compiled, auto kept")
        if "transformers alone" in pair:
            ax.plot(ks, [r["transformers"]["speedup"] for r in pair["rows"]], "^-", color="C1", label="transformers, k")
            ax.axhline(
                pair["transformers default"]["speedup"], color="C1", lw=1.5, ls=":", label="transformers default"
            )
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_title(f"α = {pair['alpha']:.2f} (noise {pair['noise']})")
        ax.set_xlabel("k (draft tokens per round)")
    axes[0][0].set_ylabel("speedup over target-only (compiled: over compiled)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    """Writes results.md and speedup.png again from results.json in a directory, e.g. after a change of this file."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("out", type=Path, help="a directory with results.json, such as benchmarks/results/cpu")
    out = parser.parse_args().out
    results = json.loads((out / "results.json").read_text())
    (out / "results.md").write_text(markdown(results))
    plot(results, out / "speedup.png")
    print(f"wrote {out / 'results.md'}, {out / 'speedup.png'}")


if __name__ == "__main__":
    main()
