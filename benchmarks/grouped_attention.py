"""What patch 0045 saves: grouped keys and values of the KV cache attended to without copies per head (CPU).

    python benchmarks/grouped_attention.py [--threads 1] [--pairs 30] [--out benchmarks/results/cpu]

SmolLM2-135M-Instruct (tools/smollm2.py: 9 heads, 3 query groups), float32, one forward pass of B rows x T tokens at
position 250 of a KV cache of 512 (a prefill of 200 tokens at position 0), timed 3 times in a row, with the copies
and without, in alternating order, `--pairs` times. "With the copies" is the forward before the patch: SDPA is
wrapped so that it copies the keys and values per head (`repeat_interleave`, as `CausalSelfAttention.forward` did)
and attends without `enable_gqa`. The ratio is with / without, paired pair by pair: above 1, the patch is faster.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from litgpt import LLM

from report import summary, write_pairs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import smollm2  # noqa: E402

SHAPES = ((8, 1, 250), (1, 1, 250), (4, 4, 250), (1, 200, 0))  # rows, tokens, position
SDPA = F.scaled_dot_product_attention


def copying_sdpa(q, k, v, *args, enable_gqa: bool = False, **kwargs) -> torch.Tensor:
    if enable_gqa:
        k, v = (t.repeat_interleave(q.size(1) // t.size(1), dim=1) for t in (k, v))
    return SDPA(q, k, v, *args, **kwargs)


@contextlib.contextmanager
def copies(on: bool):
    F.scaled_dot_product_attention = copying_sdpa if on else SDPA
    try:
        yield
    finally:
        F.scaled_dot_product_attention = SDPA


@torch.inference_mode()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    llm = LLM.load(str(smollm2.make_checkpoint(ROOT / "build" / "smollm2")), distribute=None)
    llm.distribute(accelerator="cpu", precision="32-true")
    model = llm.model
    rows = []
    for batch, tokens, position in SHAPES:
        model.set_kv_cache(batch, 512)
        model(torch.randint(0, 1000, (batch, 260)), input_pos=torch.arange(260))  # a filled cache
        idx = torch.randint(0, 1000, (batch, tokens))
        input_pos = torch.arange(position, position + tokens).repeat(batch, 1)
        ratios, seconds = [], []
        for pair in range(args.pairs):
            timed = {}
            for on in (True, False) if pair % 2 else (False, True):
                with copies(on):
                    start = time.perf_counter()
                    for _ in range(3):
                        model(idx, input_pos=input_pos, input_pos_maxp1=position + tokens)
                    timed[on] = (time.perf_counter() - start) / 3
            ratios.append(timed[True] / timed[False])
            seconds.append(timed[False])
        rows.append({"rows": batch, "tokens": tokens, "position": position, "ratios": ratios, "seconds": seconds})
        print(f"{batch} x {tokens}: {summary(ratios)}", flush=True)

    command = f"python benchmarks/grouped_attention.py --threads {args.threads} --pairs {args.pairs}"
    write_pairs(
        args.out,
        f"grouped_attention_threads{args.threads}",
        "Grouped keys and values attended to without copies per head",
        command,
        f"SmolLM2-135M-Instruct, float32, {args.threads} thread(s), one forward pass",
        ["rows x tokens", "at position", "with copies / without (paired)", "ms without copies"],
        rows,
        lambda r: f"{r['rows']} x {r['tokens']} | {r['position']}",
    )


if __name__ == "__main__":
    main()
