"""Prompt lookup decoding on a real model: where answers copy from the prompt, and where they do not.

    python -m benchmarks.prompt_lookup [--repeats 5] [--threads 1] [--out benchmarks/results/cpu]

SmolLM2-135M-Instruct (tools/smollm2.py), float32, greedy, up to 128 new tokens, stopping at <|im_end|>, on the task
set benchmarks/prompt_lookup_tasks.json (prompts whose answer copies from the prompt, and open-ended ones), with the
chat template. Interleaved (the order rotates per repeat), the tokens/s of: the fork's target alone
(`litgpt.generate.base.generate`), the fork with `prompt_lookup=True` (`speculative_k="auto"`), transformers'
target-only `generate` and its prompt lookup (`prompt_lookup_num_tokens` 3 and 10) on the same weights. Ratios are
paired repeat by repeat. Also the acceptance rate, the tokens per target forward and whether every output equals the
fork's target alone. Then the demo's Zen pair on a prompt that repeats the text: the draft model alone, the lookup
alone and both, against the target alone.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import litgpt.generate.base as base
import litgpt.generate.speculative_decoding as speculative
import torch

from benchmarks import pairs, timing
from benchmarks.report import run_machine, summary
from demo import zen

ROOT = Path(__file__).resolve().parent.parent

TASKS = ROOT / "benchmarks" / "prompt_lookup_tasks.json"
ZEN_PROMPT_LINES = 8  # the Zen pair's prompt: its first lines, then its first line again


class ForwardCounter:
    """Counts the forward passes of a module (its prefill included)."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.count = 0
        module.register_forward_pre_hook(self._hook)

    def _hook(self, *args) -> None:
        self.count += 1


def fork_runner(draft, target, eos_id: int | None, **speculative_kwargs):
    """A function that generates greedily for a prompt and returns (new token ids, acceptance rate or None)."""
    stop_tokens = ([eos_id],) if eos_id is not None else ()

    def run(prompt: torch.Tensor, new_tokens: int) -> tuple[list[int], float | None]:
        max_returned = prompt.numel() + new_tokens
        timing.fresh_cache(*[m for m in (draft, target) if m is not None], max_seq_length=max_returned)
        if not speculative_kwargs:
            out = base.generate(target, prompt, max_returned, temperature=0.0, eos_id=eos_id)[prompt.numel() :]
            out = out.tolist()
            return (out[:-1] if out and out[-1] == eos_id else out), None
        out, rate = speculative.generate(
            draft,
            target,
            prompt,
            max_returned,
            temperature=0.0,
            stop_tokens=stop_tokens,
            include_prompt=False,
            **speculative_kwargs,
        )
        return out.tolist(), rate

    return run


def hf_runner(hf_model, eos_id: int, prompt_lookup_num_tokens: int | None):
    def run(prompt: torch.Tensor, new_tokens: int) -> tuple[list[int], float | None]:
        extra = {"prompt_lookup_num_tokens": prompt_lookup_num_tokens} if prompt_lookup_num_tokens else {}
        ids = prompt[None].long()
        out = hf_model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=new_tokens,
            eos_token_id=eos_id,
            **extra,
        )[0, prompt.numel() : prompt.numel() + new_tokens].tolist()  # assisted generation can return more
        return (out[:-1] if out and out[-1] == eos_id else out), None

    return run


@torch.inference_mode()
def measure(runners: dict, counters: dict, prompts: dict, new_tokens: int, repeats: int) -> dict:
    """Interleaved repeats: {prompt name: {variant: {"tokens_per_s": [...], ...}}}."""
    results = {name: {variant: {"tokens_per_s": []} for variant in runners} for name in prompts}
    variants = list(runners)
    first = next(iter(prompts.values()))
    for variant in variants:
        runners[variant](first, 8)  # warm-up
    for repeat in range(repeats):
        order = variants[repeat % len(variants) :] + variants[: repeat % len(variants)]
        for name, prompt in prompts.items():
            for variant in order:
                counter = counters.get(variant)
                before = counter.count if counter else 0
                start = time.perf_counter()
                tokens, rate = runners[variant](prompt, new_tokens)
                seconds = time.perf_counter() - start
                entry = results[name][variant]
                entry["tokens_per_s"].append(len(tokens) / seconds)
                entry["tokens"], entry["acceptance_rate"] = tokens, rate
                if counter:
                    entry["tokens_per_forward"] = len(tokens) / max(counter.count - before - 1, 1)  # less the prefill
            print(
                f"repeat {repeat + 1}/{repeats} {name}: "
                + ", ".join(f"{v} {results[name][v]['tokens_per_s'][-1]:.1f}" for v in variants),
                flush=True,
            )
    return results


def paired(entry: dict, baseline: dict) -> list[float]:
    return [a / b for a, b in zip(entry["tokens_per_s"], baseline["tokens_per_s"])]


def markdown(results: dict, machine: dict) -> str:
    lines = [
        f"# Prompt lookup decoding, {machine['date']}",
        "",
        f"{machine['device']}, torch {machine['torch']}, transformers {machine['transformers']},"
        f" {machine['threads']} thread(s), {machine['repeats']} interleaved repeats, greedy, float32, up to"
        f" {machine['new_tokens']} new tokens. Command: `{machine['command']}`.",
        "",
        "Ratios are paired repeat by repeat: median (quartiles). tok/fwd: generated tokens per target forward pass"
        " (prefill not counted). Identical: the output equals the fork's target alone, token for token (lookup: the"
        " fork's; transformers: all three of its runs). transformers' assisted generation can return a few tokens"
        " more than `max_new_tokens`; only those asked for are counted.",
        "",
        "## SmolLM2-135M-Instruct",
        "",
        "| task | kind | new tokens | target alone tok/s | lookup tok/s | lookup / target alone | acceptance | tok/fwd"
        " | lookup / transformers PLD 3 | lookup / transformers PLD 10 | transformers PLD 10 / its target alone"
        " | identical: lookup, transformers |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, task in results["real"].items():
        alone, lookup = task["fork: target alone"], task["fork: prompt_lookup=True"]
        hf_alone = task.get("transformers: target alone")
        identical = "yes" if lookup["tokens"] == alone["tokens"] else "NO"
        hf_identical = all(e["tokens"] == alone["tokens"] for v, e in task.items() if v.startswith("transformers"))
        hf_cells = ["–", "–", "–"]
        if hf_alone:
            hf3, hf10 = (
                task["transformers: prompt_lookup_num_tokens=3"],
                task["transformers: prompt_lookup_num_tokens=10"],
            )
            hf_cells = [summary(paired(lookup, hf3)), summary(paired(lookup, hf10)), summary(paired(hf10, hf_alone))]
        lines.append(
            f"| {name} | {results['kinds'][name]} | {len(alone['tokens'])}"
            f" | {statistics.median(alone['tokens_per_s']):.1f}"
            f" | {statistics.median(lookup['tokens_per_s']):.1f} | {summary(paired(lookup, alone))}"
            f" | {lookup['acceptance_rate']:.2f} | {lookup['tokens_per_forward']:.2f} | "
            + " | ".join(hf_cells)
            + f" | {identical}, {'yes' if hf_identical else 'NO'} |"
        )
    for kind in ("copy", "open"):
        ratios = [
            statistics.median(paired(t["fork: prompt_lookup=True"], t["fork: target alone"]))
            for name, t in results["real"].items()
            if results["kinds"][name] == kind
        ]
        lines.append(
            f"\n{kind}: per-task medians of lookup / target alone: "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + f"; their median {statistics.median(ratios):.2f}, lowest {min(ratios):.2f}."
        )
    lines += [
        "",
        "## The demo's Zen pair, a prompt that repeats the text",
        "",
        "| variant | tok/s | / target alone | acceptance | identical |",
        "|---|---|---|---|---|",
    ]
    zen_pair = results["zen"]["zen"]
    alone = zen_pair["target alone"]
    for variant, entry in zen_pair.items():
        rate = entry["acceptance_rate"]
        lines.append(
            f"| {variant} | {statistics.median(entry['tokens_per_s']):.1f} | {summary(paired(entry, alone))}"
            f" | {'–' if rate is None else f'{rate:.2f}'} | {'yes' if entry['tokens'] == alone['tokens'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu")
    parser.add_argument("--quick", action="store_true", help="two tasks, 12 new tokens, one repeat (smoke test)")
    parser.add_argument("--no-transformers", action="store_true")
    parser.add_argument("--report", action="store_true", help="only write OUT/prompt_lookup.md from its .json again")
    args = parser.parse_args()
    if args.report:
        results = json.loads((args.out / "prompt_lookup.json").read_text())
        (args.out / "prompt_lookup.md").write_text(markdown(results, results["machine"]))
        return 0
    torch.set_num_threads(args.threads)
    device, dtype = torch.device("cpu"), torch.float32
    tasks = json.loads(TASKS.read_text())["tasks"]
    if args.quick:
        tasks = [next(t for t in tasks if t["kind"] == kind) for kind in ("copy", "open")]
        args.repeats, args.new_tokens = 1, 12

    _, target, tokenizer, _ = pairs.smollm2_pair(device, dtype)
    style = pairs.PromptStyle.from_config(target.config)
    prompts = {t["name"]: tokenizer.encode(style.apply(t["prompt"])) for t in tasks}
    eos = tokenizer.eos_id
    runners = {
        "fork: target alone": fork_runner(None, target, eos),
        "fork: prompt_lookup=True": fork_runner(None, target, eos, speculative_k="auto", prompt_lookup=True),
    }
    counters = {"fork: prompt_lookup=True": ForwardCounter(target)}
    if not args.no_transformers:
        from transformers import AutoModelForCausalLM

        hf = AutoModelForCausalLM.from_pretrained(pairs.smollm2_dir(), dtype=dtype).eval()
        runners["transformers: target alone"] = hf_runner(hf, eos, None)
        for n in (3, 10):
            runners[f"transformers: prompt_lookup_num_tokens={n}"] = hf_runner(hf, eos, n)
    real = measure(runners, counters, prompts, args.new_tokens, args.repeats)

    zen_draft, zen_target, zen_tokenizer = pairs.zen_pair(device, dtype)
    lines = zen.zen_of_python().splitlines()
    zen_prompt = "\n".join(lines[2 : 2 + ZEN_PROMPT_LINES] + [lines[2]]) + "\n"
    zen_eos = zen_tokenizer.eos_id
    zen_runners = {
        "target alone": fork_runner(None, zen_target, zen_eos),
        "draft model, auto": fork_runner(zen_draft, zen_target, zen_eos, speculative_k="auto"),
        "lookup, auto": fork_runner(None, zen_target, zen_eos, speculative_k="auto", prompt_lookup=True),
        "draft model + lookup, auto": fork_runner(
            zen_draft, zen_target, zen_eos, speculative_k="auto", prompt_lookup=True
        ),
    }
    zen_results = measure(zen_runners, {}, {"zen": zen_tokenizer.encode(zen_prompt)}, args.new_tokens, args.repeats * 3)

    import transformers

    kinds = {task["name"]: task["kind"] for task in tasks}
    results = {
        "machine": run_machine(args, transformers=transformers.__version__),
        "kinds": kinds,
        "real": real,
        "zen": zen_results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "prompt_lookup.json").write_text(json.dumps(results, indent=1))
    (args.out / "prompt_lookup.md").write_text(markdown(results, results["machine"]))
    print(markdown(results, results["machine"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
