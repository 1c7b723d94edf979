"""`--compile` through the CLI, on the demo pair: compiled speculative decoding against the compiled target alone.

    python benchmarks/compile_cli.py [--repeats 3] [--out benchmarks/results/cpu]

Runs, interleaved, `litgpt generate <target>` and `litgpt generate_speculatively <draft> <target>` (k = 4 and auto),
each with and without --compile, with --max_new_tokens 100 --num_samples 4 --temperature 0 --precision 32-true, and
reads the tokens/s that the CLI prints: the first sample includes compilation (each run gets an empty inductor cache,
as on a first run), samples 2-4 are the steady state. Then counts the graphs that `generate_speculatively --compile`
compiles for 50 and 200 new tokens, with k = 4 and auto (in a fresh process each), which must not grow with the
number of tokens.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "demo"))
import zen  # noqa: E402
from report import command_line  # noqa: E402

PROMPT = "Errors should never"
COMMON = ["--prompt", PROMPT, "--temperature", "0", "--precision", "32-true", "--max_new_tokens", "100"]
COUNT_GRAPHS = """
import sys
from pathlib import Path
from torch._dynamo.utils import counters
import litgpt.generate.speculative_decoding as speculative
k = sys.argv[4] if sys.argv[4] == "auto" else int(sys.argv[4])
speculative.main(Path(sys.argv[1]), Path(sys.argv[2]), {prompt!r}, max_new_tokens=int(sys.argv[3]), speculative_k=k,
                 temperature=0.0, precision="32-true", compile=True, num_samples=2)
print("GRAPHS", counters["stats"]["unique_graphs"], "RECOMPILES", sum(counters["recompiles"].values()))
"""


def litgpt(*args: str) -> list[float]:
    """Runs the litgpt CLI with an empty inductor cache; returns the tokens/s of each sample."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        result = subprocess.run(["litgpt", *args], capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"litgpt {' '.join(args)} failed:\n{result.stderr[-3000:]}")
    return [float(x) for x in re.findall(r"([\d.]+) tokens/sec", result.stderr)]


def count_graphs(draft: Path, target: Path, new_tokens: int, speculative_k: str) -> tuple[int, int]:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        code = COUNT_GRAPHS.format(prompt=PROMPT)
        cmd = [sys.executable, "-c", code, str(draft), str(target), str(new_tokens), speculative_k]
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    graphs, recompiles = re.search(r"GRAPHS (\d+) RECOMPILES (\d+)", out).groups()
    return int(graphs), int(recompiles)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu")
    parser.add_argument("--no-auto", action="store_true", help="k = 4 only (each compiled auto run takes minutes)")
    args = parser.parse_args()
    draft, target = zen.build_zen_pair(ROOT / "build" / "demo")
    commands = {
        "target alone": ["generate", str(target)],
        "speculative, k = 4": ["generate_speculatively", str(draft), str(target), "--speculative_k", "4"],
        "speculative, auto": ["generate_speculatively", str(draft), str(target), "--speculative_k", "auto"],
    }
    if args.no_auto:
        del commands["speculative, auto"]
    runs: dict = {f"{name}{c}": [] for name in commands for c in ("", ", compiled")}
    for repeat in range(args.repeats):
        for name, command in commands.items():
            for compiled in ("", ", compiled"):
                extra = ["--compile", "true"] if compiled else []
                speeds = litgpt(*command, *COMMON, "--num_samples", "4", *extra)
                runs[f"{name}{compiled}"].append(speeds)
                print(f"repeat {repeat}: {name}{compiled}: {speeds}", flush=True)
    steady = {name: statistics.median(s for r in speeds for s in r[1:]) for name, speeds in runs.items()}
    first = {name: statistics.median(100 / r[0] for r in speeds) for name, speeds in runs.items()}
    ks = ("4",) if args.no_auto else ("4", "auto")
    graphs = {f"k = {k}, {n} new tokens": count_graphs(draft, target, n, k) for k in ks for n in (50, 200)}
    # per repeat: the steady state (median of samples 2-4) over the target alone's with the same compile setting
    paired = {
        name: [
            statistics.median(r[1:]) / statistics.median(a[1:])
            for r, a in zip(speeds, runs["target alone, compiled" if name.endswith("compiled") else "target alone"])
        ]
        for name, speeds in runs.items()
    }
    results = {
        "machine": {
            "date": datetime.date.today().isoformat(),
            "platform": platform.platform(),
            "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__,
        },
        "runs": runs,
        "steady_tokens_per_s": steady,
        "first_sample_seconds": first,
        "graphs": graphs,
        "paired_ratios": paired,
        "command": command_line(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compile_cli.json").write_text(json.dumps(results, indent=1))
    lines = [
        f"# `--compile` through the CLI on the demo pair, {results['machine']['date']}",
        "",
        f"{results['machine']['platform']}, {results['machine']['torch_threads']} torch threads, torch "
        f"{results['machine']['torch']}. `{' '.join(COMMON)} --num_samples 4`, {args.repeats} interleaved repeats; "
        "steady state: median tokens/s of samples 2-4; first sample: median seconds of sample 1 (compilation with "
        "an empty inductor cache, for compiled runs). Paired: the ratio per repeat, median (quartiles). Command:"
        f" `{results['command']}`.",
        "",
        "| command | steady tokens/s | vs target alone (same compile setting) | paired per repeat | first sample (s) |",
        "|---|---|---|---|---|",
    ]
    for name in runs:
        reference = "target alone, compiled" if name.endswith("compiled") else "target alone"
        ratios = paired[name]
        spread = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else ratios * 3
        lines.append(
            f"| {name} | {steady[name]:.1f} | {steady[name] / steady[reference]:.2f}"
            f" | {spread[1]:.2f} ({spread[0]:.2f}–{spread[2]:.2f}) | {first[name]:.1f} |"
        )
    lines += [
        "",
        "Graphs compiled by `generate_speculatively --compile true` (2 samples), in a fresh process each:",
        "",
        *(f"- {what}: {g} graphs, {r} recompilations" for what, (g, r) in graphs.items()),
    ]
    (args.out / "compile_cli.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
