"""How fast is speculative decoding here, against what it could be and against what users would pick instead?

    python -m benchmarks.speculative_speed                       # CPU: 8 layers x 768, ~25 minutes on 2 cores
    python -m benchmarks.speculative_speed --quick --out DIR     # tiny configuration, seconds (CI smoke test)
    python -m benchmarks.speculative_speed --device cuda --precision bf16-true --compile \\
        --target-config pythia-1.4b                              # a GPU, a real shape (see README)

Pairs with a controlled acceptance rate (see pairs.py). For each pair, interleaved and repeated, on the same prompt:
greedy tokens/s of LitGPT target-only decoding (`litgpt.generate.base`), of the installed fork with k = 1..8, with
k = "auto" (a new AutoSpeculativeK each generation) and with one AutoSpeculativeK kept over the generations of a pair
(as `--num_samples` and `LLM.generate` keep it), of transformers' assisted generation on the same weights (k = 1..8,
and its own default and heuristic schedules), and with --compile the same compiled as `--compile` does (target-only
and speculative); the measured alpha, the draft/target cost ratio c and the cost v(k+1) of verifying k+1 tokens (in
target forwards), the bound of Leviathan et al. 2023 with those costs and efficiency = speedup / bound; the k that
"auto" chose; and, with models that cost nothing, the loop's own time per round against unpatched 0.5.13.
Writes results.json, results.md and speedup.png to --out (default: benchmarks/results/<device>).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.metadata
import json
import platform
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import litgpt.generate.base as base
import litgpt.generate.speculative_decoding as fork
import torch

from benchmarks import pairs, report, timing

ROOT = Path(__file__).resolve().parent.parent
DTYPES = {"32-true": torch.float32, "bf16-true": torch.bfloat16, "16-true": torch.float16}


@dataclasses.dataclass(frozen=True)
class Setup:
    target_config: str
    n_layer: int | None
    vocab: int | None
    prompt_len: int
    new_tokens: int
    ks: tuple[int, ...]
    noises: tuple[float, ...]
    repeats: int


CPU = Setup("pythia-160m", 8, 4096, 16, 128, tuple(range(1, 9)), (0.0, 0.001, 0.0025, 0.005), 5)
QUICK = Setup("pythia-14m", 2, 256, 4, 8, (1, 2), (0.0, 0.05), 1)


def run(setup: Setup, device: torch.device, dtype: torch.dtype, compile: bool, with_transformers: bool) -> dict:
    config = pairs.target_config(
        setup.target_config, setup.prompt_len + setup.new_tokens + 16, n_layer=setup.n_layer, vocab=setup.vocab
    )
    draft, target = pairs.controlled_pair(config, device, dtype)
    torch.manual_seed(1234)
    prompt = torch.randint(0, config.vocab_size, (setup.prompt_len,), device=device)
    max_returned = setup.prompt_len + setup.new_tokens
    tmp = Path(tempfile.mkdtemp(prefix="spec-bench-"))
    hf = pairs.hf_models(draft, target, tmp / "hf") if with_transformers else None

    implementations = {"": (base, fork)}
    if compile:
        compiled = (
            timing.load_module_copy(Path(base.__file__), "base_compiled"),
            timing.load_module_copy(Path(fork.__file__), "speculative_decoding_compiled"),
        )
        timing.compile_like_the_cli(*compiled[::-1])
        implementations["compiled "] = compiled
    chosen = {prefix: timing.ChosenK(speculative) for prefix, (_, speculative) in implementations.items()}

    results: dict = {"setup": dataclasses.asdict(setup), "config": config.name, "pairs": []}
    for noise in setup.noises:
        pairs.set_noise(target, noise)
        if hf is not None:
            pairs.sync_hf_noise(target, hf[1])
        c, v = timing.forward_costs(draft, target, setup.prompt_len + setup.new_tokens // 2, max(setup.ks) + 1)
        samples: dict = defaultdict(list)  # what -> [(seconds per new token, acceptance rate)]
        identical: dict = defaultdict(list)  # what -> [greedy output == target-only output]
        trajectories: dict = {}
        # one AutoSpeculativeK per implementation for all generations with this pair, as the CLI and LLM keep one
        kept = {prefix: speculative.AutoSpeculativeK(8) for prefix, (_, speculative) in implementations.items()}

        def measure(what, fn, expected=None):
            (out, rate), secs = timing.seconds(fn, device)
            samples[what].append((secs / setup.new_tokens, rate))
            if expected is not None:
                identical[what].append(torch.equal(out.to(expected.device), expected))
            return out

        # with --compile, an untimed first pass compiles everything (the models stay the same objects afterwards)
        first = -1 if compile and noise == setup.noises[0] else 0
        for repeat in range(first, setup.repeats):
            if repeat == 0:
                samples.clear()
                identical.clear()
            expected = None
            for prefix, (base_module, speculative) in implementations.items():

                def alone(module=base_module):
                    timing.fresh_cache(target, max_seq_length=max_returned)
                    return module.generate(target, prompt, max_returned, temperature=0.0), 0.0

                out = measure(f"{prefix}target", alone, expected)
                expected = out if expected is None else expected
                for k in (*setup.ks, "auto", "auto kept"):

                    def speculate(module=speculative, k=kept[prefix] if k == "auto kept" else k):
                        timing.fresh_cache(draft, target, max_seq_length=max_returned)
                        return module.generate(draft, target, prompt, max_returned, temperature=0.0, speculative_k=k)

                    chosen[prefix].ks.clear()
                    measure(f"{prefix}fork {k}", speculate, expected)
                    if k in ("auto", "auto kept"):
                        trajectories[f"{prefix}{k}"] = list(chosen[prefix].ks)
            if hf is not None:
                for schedule in (None, *setup.ks, "default", "heuristic"):
                    out = measure(
                        f"transformers {schedule}",
                        lambda schedule=schedule: (timing.hf_generate(*hf, prompt, setup.new_tokens, schedule), 0.0),
                        expected,
                    )
        alpha = timing.agreement(draft, target, expected, setup.prompt_len)
        pair = summarize(samples, identical, setup, implementations, hf is not None)
        pair.update(noise=noise, alpha=alpha, c=c, v=v, auto_ks=trajectories)
        for row in pair["rows"]:
            row["v"] = v[row["k"] + 1]
            row["bound"] = timing.bound(alpha, row["k"], c, row["v"])
            row["efficiency"] = row["fork"]["speedup"] / row["bound"]
        results["pairs"].append(pair)
        print(report.markdown_pair(pair), flush=True)

    if device.type == "cpu":
        upstream = timing.load_upstream_module(tmp / "upstream")
        results["loop_overhead"] = timing.loop_overhead(
            {"fork": fork, "0.5.13": upstream}, setup.ks, setup.new_tokens, repeats=40 * setup.repeats
        )
        print(report.markdown_overhead(results["loop_overhead"]), flush=True)
    return results


def summarize(samples: dict, identical: dict, setup: Setup, implementations: dict, with_transformers: bool) -> dict:
    """Median tokens/s, speedups over target-only (eager, or compiled for compiled runs) and acceptance rates."""

    def summary(what, reference):
        per_token = [s[0] for s in samples[what]]
        mid = statistics.median(per_token)
        return {
            "tokens_per_s": 1 / mid,
            "spread": (max(per_token) - min(per_token)) / mid,
            "seconds_per_token": per_token,  # per repeat, for held_out_best
            "speedup": statistics.median(s[0] for s in samples[reference]) / mid,
            "acceptance_rate": statistics.median(s[1] for s in samples[what]),
            "identical": f"{sum(identical[what])}/{len(identical[what])}" if identical[what] else None,
        }

    rows: dict = {k: {"k": k} for k in setup.ks}
    extra: dict = {}
    for prefix in implementations:
        extra[f"{prefix}target"] = summary(f"{prefix}target", f"{prefix}target")
        extra[f"{prefix}auto"] = summary(f"{prefix}fork auto", f"{prefix}target")
        extra[f"{prefix}auto kept"] = summary(f"{prefix}fork auto kept", f"{prefix}target")
        for k in setup.ks:
            rows[k][f"{prefix}fork"] = summary(f"{prefix}fork {k}", f"{prefix}target")
    if with_transformers:
        for k in setup.ks:
            rows[k]["transformers"] = summary(f"transformers {k}", "target")
        for schedule in (None, "default", "heuristic"):
            extra[f"transformers {schedule or 'alone'}"] = summary(f"transformers {schedule}", "target")
    return {"rows": list(rows.values()), **extra}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny configuration for a smoke test")
    parser.add_argument("--out", type=Path, help="where to write the results (default: benchmarks/results/<device>)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--precision", default="32-true", choices=sorted(DTYPES))
    parser.add_argument("--compile", action="store_true", help="also measure compiled, as --compile does")
    parser.add_argument("--target-config", help="a LitGPT config name, at its full size (default: 8 x 768 Pythia)")
    parser.add_argument("--no-transformers", action="store_true", help="skip transformers' assisted generation")
    parser.add_argument("--repeats", type=int, help="interleaved repeats (default: 5)")
    args = parser.parse_args()

    setup = QUICK if args.quick else CPU
    if args.target_config:
        setup = dataclasses.replace(setup, target_config=args.target_config, n_layer=None, vocab=None)
    if args.repeats:
        setup = dataclasses.replace(setup, repeats=args.repeats)
    device = torch.device(args.device)
    litgpt_version = importlib.metadata.version("litgpt")  # of the code imported now, not of a reinstall during the run
    results = run(setup, device, DTYPES[args.precision], args.compile, not args.no_transformers)
    results["machine"] = {
        "date": datetime.date.today().isoformat(),
        "platform": platform.platform(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "torch_threads": torch.get_num_threads(),
        "precision": args.precision,
        "compile": args.compile,
        "torch": torch.__version__,
        "litgpt": litgpt_version,
        "transformers": None if args.no_transformers else importlib.metadata.version("transformers"),
        "python": platform.python_version(),
    }
    out = args.out or ROOT / "benchmarks" / "results" / device.type
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "results.md").write_text(report.markdown(results))
    report.plot(results, out / "speedup.png")
    print(f"\nwrote {out / 'results.md'}, {out / 'results.json'}, {out / 'speedup.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
