"""`speculative_k="auto"` against every fixed k and the target alone, in simulation: a minute instead of hours.

    python benchmarks/auto_k_simulation.py                        # CPU and GPU cost models, 128 new tokens
    python benchmarks/auto_k_simulation.py --new-tokens 512 --set evidence=4 --set patience=128

The installed `AutoSpeculativeK` chooses k as in `generate()`, but rounds are not run: each draft token is accepted with
probability alpha, independently, and a round costs k * c + v(k + 1) target steps (a step of the target alone 1, and
catching the draft up on j skipped tokens c * (1 + 0.02 j)), times lognormal noise. On this CPU the real benchmark needs
hours to tell 3% apart (its repeats differ by 10-25%); here the same comparison takes under a minute, so that a change
to the rules can be judged before it is measured. The "cpu" cost model is fitted to benchmarks/results/cpu/auto/; "gpu"
is an assumption (verifying a few tokens costs about one step), to be replaced by a fit to a GPU run. Prints, per alpha,
the best fixed choice (the least mean time, known in hindsight) and auto's speed relative to it, for a new
AutoSpeculativeK per generation and for one kept over `--generations` generations (the first not counted).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import math
import random
import statistics
import sys

from litgpt.generate.auto_speculative_k import AutoSpeculativeK


@dataclasses.dataclass(frozen=True)
class CostModel:
    """Seconds in steps of the target alone: a draft step costs `c`; verifying n >= 2 tokens `verify_base +
    verify_per_token * n`; each round's or step's time is multiplied by exp(N(0, sigma))."""

    c: float
    verify_base: float
    verify_per_token: float
    sigma: float

    def verify(self, n: int) -> float:
        return 1.0 if n == 1 else self.verify_base + self.verify_per_token * n


COST_MODELS = {
    "cpu": CostModel(c=0.17, verify_base=1.46, verify_per_token=0.19, sigma=0.12),
    "gpu": CostModel(c=0.25, verify_base=0.97, verify_per_token=0.03, sigma=0.03),
}
ALPHAS = (1.0, 0.9, 0.85, 0.73, 0.65, 0.56, 0.4)


def generation_seconds(k: int | AutoSpeculativeK, cost: CostModel, alpha: float, new_tokens: int, seed: int) -> float:
    """The simulated seconds of one greedy generation of `new_tokens` (the first from the prefill, not timed)."""
    accepts, noise = random.Random(seed), random.Random(seed + 1_000_003)
    seconds, done, skipped = 0.0, 1, 0
    while done < new_tokens:
        round_k = min(k if isinstance(k, int) else k.choose(), new_tokens - done)
        accepted = 0
        if round_k == 0:
            step = cost.verify(1)
            skipped += 1
        else:
            while accepted < round_k and accepts.random() < alpha:
                accepted += 1
            catch_up = cost.c * (1 + 0.02 * skipped) if skipped else 0.0
            step = round_k * cost.c + cost.verify(round_k + 1) + catch_up
            skipped = 0
        step *= math.exp(noise.gauss(0.0, cost.sigma))
        seconds += step
        done += accepted + 1
        if not isinstance(k, int):
            k.update(round_k, accepted, step)
    return seconds


def compare(auto: type[AutoSpeculativeK], cost: CostModel, alpha: float, args: argparse.Namespace) -> dict:
    """Mean seconds per generation of each fixed k (0: the target alone), and auto's speed relative to the best."""
    seeds = range(args.seeds)
    fixed = {
        k: statistics.mean(generation_seconds(k, cost, alpha, args.new_tokens, s) for s in seeds)
        for k in range(args.k_max + 1)
    }
    best = min(fixed, key=fixed.get)
    fresh = statistics.mean(generation_seconds(auto(args.k_max), cost, alpha, args.new_tokens, s) for s in seeds)
    kept_times = []
    for s in seeds:
        kept = auto(args.k_max)
        times = [generation_seconds(kept, cost, alpha, args.new_tokens, s * 1000 + g) for g in range(args.generations)]
        kept_times.extend(times[1:])
    return {"best": best, "fresh": fixed[best] / fresh, "kept": fixed[best] / statistics.mean(kept_times)}


def parse_overrides(settings: list[str]) -> dict:
    """`NAME=VALUE` pairs for AutoSpeculativeK's class attributes (its rules' numbers, all integers)."""
    allowed = sorted(name for name, value in vars(AutoSpeculativeK).items() if isinstance(value, int))
    overrides = {}
    for setting in settings:
        name, _, value = setting.partition("=")
        if name not in allowed:
            raise ValueError(f"--set {setting!r}: NAME must be one of {', '.join(allowed)}")
        try:
            overrides[name] = int(value)
        except ValueError:
            raise ValueError(f"--set {setting!r}: VALUE must be an integer") from None
    return overrides


def markdown(results: dict, cost_name: str, args: argparse.Namespace, overrides: dict) -> str:
    changed = ", ".join(f"{name} = {value}" for name, value in overrides.items()) or "as installed"
    lines = [
        f"### {cost_name} cost model: {COST_MODELS[cost_name]}",
        "",
        f"{args.new_tokens} new tokens, {args.seeds} seeds, k_max {args.k_max}; AutoSpeculativeK {changed}.",
        "",
        "| α | best fixed choice | auto, new per generation / best | auto, kept / best |",
        "|---|---|---|---|",
    ]
    for alpha, row in results.items():
        best = "target alone" if row["best"] == 0 else f"k = {row['best']}"
        lines.append(f"| {alpha:.2f} | {best} | {row['fresh']:.3f} | {row['kept']:.3f} |")
    worst = {what: min(row[what] for row in results.values()) for what in ("fresh", "kept")}
    lines.append(f"| worst | | {worst['fresh']:.3f} | {worst['kept']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cost", nargs="+", choices=sorted(COST_MODELS), default=["cpu", "gpu"])
    parser.add_argument("--alphas", type=float, nargs="+", default=ALPHAS)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--seeds", type=int, default=200, help="generations per choice and alpha")
    parser.add_argument("--generations", type=int, default=5, help="kept: generations per seed, the first not counted")
    parser.add_argument("--k-max", type=int, default=8)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="change one of auto's rules")
    args = parser.parse_args(argv)
    if args.generations < 2:
        parser.error(f"--generations must be at least 2 (the first is not counted), got {args.generations}")
    try:
        overrides = parse_overrides(args.set)
    except ValueError as error:
        parser.error(str(error))
    auto = type("AutoSpeculativeK", (AutoSpeculativeK,), overrides)
    print(f"# `auto` in simulation (litgpt {importlib.metadata.version('litgpt')})\n")
    for cost_name in args.cost:
        results = {alpha: compare(auto, COST_MODELS[cost_name], alpha, args) for alpha in args.alphas}
        print(markdown(results, cost_name, args, overrides), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
