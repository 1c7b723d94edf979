"""Draft heads compared offline on what people ask: how often each head's most probable token is the target's, per
step ahead, on the target's own greedy answers to prompts in no head's training data (as `litgpt train_draft` measures
its held-back acceptance, and as a round of drafted tokens is accepted at temperature 0).

    python -m benchmarks.draft_head_offline --heads build/heads/A build/heads/B [--sharegpt 16] [--new-tokens 128]
        [--out benchmarks/results/cpu/draft_head_offline]

The prompts: the eight of tools/smollm2.py and the first turns of `--sharegpt` conversations of ShareGPT's held-back
split (`benchmarks/draft_head.py`'s). The target's answers are generated once (greedy, float32) and shared by the heads.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from litgpt import LLM

from benchmarks.draft_head import offline_acceptance, sharegpt_prompts
from benchmarks.report import run_machine, write_results
from tools import smollm2

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--heads", type=Path, nargs="+", required=True)
    parser.add_argument("--target", type=Path, help="the heads' target (SmolLM2-135M-Instruct by default)")
    parser.add_argument("--sharegpt", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu" / "draft_head_offline")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    checkpoint_dir = args.target or smollm2.make_checkpoint(ROOT / "build" / "smollm2")
    llm = LLM.load(str(checkpoint_dir), distribute=None)
    llm.distribute(accelerator="cpu", precision="32-true")
    prompts = {"handwritten": list(smollm2.PROMPTS), "ShareGPT": sharegpt_prompts(llm, args.sharegpt)}
    results = {"machine": run_machine(args), "heads": {}}
    # the target's answers, made once for these prompts and kept
    kept = ROOT / "build" / "draft_head_offline_answers.json"
    answers = json.loads(kept.read_text()) if kept.is_file() else {}
    key = json.dumps([prompts, args.new_tokens])
    if key not in answers:
        start = time.perf_counter()
        answers[key] = {
            kind: [llm.generate(p, max_new_tokens=args.new_tokens, temperature=0) for p in group]
            for kind, group in prompts.items()
        }
        print(f"the target's answers: {time.perf_counter() - start:.0f}s", file=sys.stderr)
        kept.write_text(json.dumps(answers))
    answers = answers[key]
    for head_dir in args.heads:
        head = LLM.load(str(head_dir), distribute=None)
        head.distribute(accelerator="cpu", precision="32-true")
        per_kind = {}
        for kind, group in prompts.items():
            measured = [offline_acceptance(llm, head, p, a) for p, a in zip(group, answers[kind])]
            positions = sum(n for _, n in measured)
            per_kind[kind] = [sum(a[j] for a, _ in measured) / positions for j in range(3)]
        training = head_dir / "training.json"
        results["heads"][str(head_dir)] = {
            "acceptance": per_kind,
            "training": json.loads(training.read_text()) if training.is_file() else None,
        }
        print(head_dir, json.dumps(per_kind), file=sys.stderr)
    write_results(args.out, results, markdown(results))
    return 0


def markdown(results: dict) -> str:
    machine = results["machine"]
    lines = [
        f"# Draft heads offline, on the target's greedy answers to people's prompts ({machine['date']})",
        "",
        f"`{machine['command']}`",
        "",
        "| head | handwritten: step 1 / 2 / 3 | ShareGPT held back: step 1 / 2 / 3 | trained tokens | minutes |",
        "|---|---|---|---|---|",
    ]
    for head, r in results["heads"].items():
        t = r["training"] or {}
        minutes = (t.get("seconds", 0) + t.get("data_seconds", 0)) / 60
        cells = [" / ".join(f"{a:.2f}" for a in r["acceptance"][kind]) for kind in ("handwritten", "ShareGPT")]
        lines.append(f"| {Path(head).name} | {cells[0]} | {cells[1]} | {t.get('tokens', 0):,} | {minutes:.1f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
