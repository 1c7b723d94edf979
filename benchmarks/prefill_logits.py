"""What patch 0047 saves: a prefill that computes the logits of the prompt's last position only (`logits_to_keep`).

    python benchmarks/prefill_logits.py [--threads 1] [--pairs 15] [--out benchmarks/results/cpu]

SmolLM2-135M-Instruct (tools/smollm2.py) and its first 4 blocks as a draft model (whose head is most of its cost),
float32: one forward pass of B prompts of T tokens into an empty KV cache, with the logits of every position (before
the patch) and of the last one (`logits_to_keep=1`), in alternating order, `--pairs` times. The ratio is all / last,
paired pair by pair: above 1, the patch is faster.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from litgpt import LLM

from report import summary, write_pairs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import layer_draft  # noqa: E402
import smollm2  # noqa: E402

SHAPES = ((1, 45), (1, 200), (4, 45))  # prompts, tokens: a short chat prompt, a long one, four that join at once


def seconds(model, idx: torch.Tensor, keep: int) -> float:
    start = time.perf_counter()
    with model.kv_cache_rows(0, idx.size(0)):
        model(idx, input_pos=torch.arange(idx.size(1)), input_pos_maxp1=idx.size(1), logits_to_keep=keep)
    return time.perf_counter() - start


@torch.inference_mode()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    target = smollm2.make_checkpoint(ROOT / "build" / "smollm2")
    models = {"target": target, "draft (first 4 blocks)": layer_draft.make_draft(target, 4)}
    rows = []
    for name, checkpoint_dir in models.items():
        llm = LLM.load(str(checkpoint_dir), distribute=None)
        llm.distribute(accelerator="cpu", precision="32-true")
        llm.model.set_kv_cache(max(b for b, _ in SHAPES), 512)
        for batch, tokens in SHAPES:
            idx = torch.randint(0, 1000, (batch, tokens))
            seconds(llm.model, idx, 0)  # the first pass is slower: not measured
            timed = [
                {keep: seconds(llm.model, idx, keep) for keep in ((0, 1) if pair % 2 else (1, 0))}
                for pair in range(args.pairs)
            ]
            rows.append(
                {
                    "model": name,
                    "prompts": batch,
                    "tokens": tokens,
                    "ratios": [t[0] / t[1] for t in timed],
                    "seconds": [t[1] for t in timed],
                }
            )
            print(f"{name}, {batch} x {tokens}: {summary(rows[-1]['ratios'])}", flush=True)

    command = f"python benchmarks/prefill_logits.py --threads {args.threads} --pairs {args.pairs}"
    write_pairs(
        args.out,
        f"prefill_logits_threads{args.threads}",
        "Prefills that compute the logits of the last position only",
        command,
        f"SmolLM2-135M-Instruct and its first 4 blocks, float32, {args.threads} thread(s), one forward pass",
        ["model", "prompts x tokens", "logits of all positions / of the last (paired)", "ms, the last"],
        rows,
        lambda r: f"{r['model']} | {r['prompts']} x {r['tokens']}",
    )


if __name__ == "__main__":
    main()
