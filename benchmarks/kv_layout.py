"""Which KV cache layout lets memory follow the tokens on this CPU: rows of one dense tensor, resized in chunks, or
paged blocks gathered for SDPA (FlexAttention's paged path needs `torch.compile`; SDPA over gathered blocks is what runs
without it).

    python -m benchmarks.kv_layout --threads 2 --repeats 7 --out benchmarks/results/cpu/kv_layout

For SmolLM2-135M-Instruct's attention (30 layers, 9 heads, 3 query groups of 64, float32) and a batch of 8 rows whose
lengths are spread over `--lengths`, it times, per round of the whole model: the dense layout's attention (SDPA over the
rows' caches up to the longest row), the paged layout's (the rows' blocks of 16 tokens gathered into the same shape,
then SDPA), and the dense layout's copy when its rows grow by a step of 16 tokens (once per 16 tokens of the longest
row); against a round of the real model at the same batch (`LLM.generate`'s forward of the rows' next tokens). Variants
interleaved, repeat by repeat; the median and the spread over repeats. Every layer reads the same cache tensors (one
layer's worth of memory), in both layouts alike, so caches of the CPU may favour both over a real model's layers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from tools import smollm2

ROOT = Path(__file__).resolve().parent.parent

LAYERS, HEADS, GROUPS, HEAD_SIZE, BLOCK, CHUNK = 30, 9, 3, 64, 16, 16  # CHUNK: KVMemory.chunk


def timed(fn, iterations: int) -> float:
    start = time.perf_counter()
    for _ in range(iterations):
        fn()
    return (time.perf_counter() - start) / iterations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--lengths", type=int, nargs=2, default=[200, 450], help="the rows' lengths, spread evenly")
    parser.add_argument("--tokens", type=int, default=1, help="tokens per row per round (1 + proposals)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu" / "kv_layout")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows, T = args.rows, args.tokens
    lengths = [round(args.lengths[0] + i * (args.lengths[1] - args.lengths[0]) / max(rows - 1, 1)) for i in range(rows)]
    longest = max(lengths) + T
    q = torch.randn(rows, HEADS, T, HEAD_SIZE)
    mask = torch.ones(rows, 1, T, longest, dtype=torch.bool)
    for b, n in enumerate(lengths):
        mask[b, :, :, n + T :] = False
    # dense: one tensor per layer, rows x longest
    dense = [(torch.randn(rows, GROUPS, longest, HEAD_SIZE), torch.randn(rows, GROUPS, longest, HEAD_SIZE))] * LAYERS
    # paged: a pool of blocks per layer and a block table per row
    blocks_per_row = [-(-(n + T) // BLOCK) for n in lengths]
    pool_blocks = sum(blocks_per_row)
    pool = [(torch.randn(pool_blocks, GROUPS, BLOCK, HEAD_SIZE), torch.randn(pool_blocks, GROUPS, BLOCK, HEAD_SIZE))]
    pool *= LAYERS
    width = max(blocks_per_row)
    order = torch.randperm(pool_blocks)  # blocks handed out as they come: scattered in the pool
    table = torch.zeros(rows, width, dtype=torch.long)
    start = 0
    for b, n in enumerate(blocks_per_row):
        table[b, :n] = order[start : start + n]
        start += n

    def attend_dense():
        for k, v in dense:
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

    def attend_paged():
        for k_pool, v_pool in pool:
            k = k_pool[table].transpose(1, 2).reshape(rows, GROUPS, width * BLOCK, HEAD_SIZE)[:, :, :longest]
            v = v_pool[table].transpose(1, 2).reshape(rows, GROUPS, width * BLOCK, HEAD_SIZE)[:, :, :longest]
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

    def grow_dense():
        for k, v in dense:
            for old in (k, v):
                new = old.new_zeros(rows, GROUPS, longest + CHUNK, HEAD_SIZE)
                new[:, :, :longest] = old

    from litgpt import LLM

    llm = LLM.load(str(smollm2.make_checkpoint(ROOT / "build" / "smollm2")), distribute=None)
    llm.distribute(accelerator="cpu", precision="32-true")
    model = llm.model
    model.set_kv_cache(rows, longest + T)
    idx = torch.randint(0, 1000, (rows, T))
    input_pos = torch.tensor([list(range(n, n + T)) for n in lengths])

    def model_round():
        with torch.inference_mode():
            model(idx, input_pos=input_pos, input_pos_maxp1=longest)

    variants = {"model round": model_round, "dense attention": attend_dense, "paged attention": attend_paged}
    variants["dense grow by a chunk"] = grow_dense
    for fn in variants.values():
        fn()  # warm up
    seconds = {name: [] for name in variants}
    for repeat in range(args.repeats):
        names = list(variants) if repeat % 2 == 0 else list(variants)[::-1]
        for name in names:
            seconds[name].append(timed(variants[name], 3))
    rounds_per_chunk = CHUNK / T
    per_round = {
        "dense": seconds["dense attention"],
        "paged": seconds["paged attention"],
        "dense with growth": [
            a + g / rounds_per_chunk for a, g in zip(seconds["dense attention"], seconds["dense grow by a chunk"])
        ],
    }
    lines = [
        f"# KV layouts, {rows} rows of {lengths[0]}..{lengths[-1]} tokens, {T} token(s) per row per round, "
        f"{args.threads} threads, {args.repeats} repeats",
        "",
        "    " + " ".join(sys.argv),
        "",
        "| per round of the model | ms (median) | min–max | share of a model round (median) |",
        "|---|---|---|---|",
    ]
    model_ms = statistics.median(seconds["model round"]) * 1e3
    for name, values in [("model round", seconds["model round"]), *per_round.items()]:
        ms = [value * 1e3 for value in values]
        share = statistics.median(m / r for m, r in zip(values, seconds["model round"]))
        lines.append(f"| {name} | {statistics.median(ms):.2f} | {min(ms):.2f}–{max(ms):.2f} | {share:.3f} |")
    paged, dense = statistics.median(per_round["paged"]), statistics.median(per_round["dense"])
    model = statistics.median(seconds["model round"])
    grow = statistics.median(seconds["dense grow by a chunk"])
    lines += [
        "",
        f"Paged over dense, per round: {(paged - dense) * 1e3:+.2f} ms ({(paged - dense) / model:+.1%} of a model round"
        f" of {model_ms:.1f} ms); the dense growth costs {grow * 1e3:.2f} ms per {CHUNK} tokens of the longest row.",
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kv_layout.json").write_text(
        json.dumps({"command": sys.argv, "lengths": lengths, "seconds": seconds}, indent=1)
    )
    (args.out / "kv_layout.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
