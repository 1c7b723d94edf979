"""One layer's attention in a decoding round of a server's batch, as the engine computes it (SDPA in runs of rows of
similar lengths, `litgpt.model.attend_in_runs`) against FlexAttention over each row's own keys (compiled, a block mask
of each row's length): the probe for attention over each row's own length.

    python -m benchmarks.decode_attention [--rows 8 12 16] [--batches 4] [--repeats 3] [--threads 2] [--out DIR]

SmolLM2-135M-Instruct's shapes (9 query heads, 3 key-value heads of 64), float32, one query per row, keys in a cache of
2,048 positions. Each row is a ShareGPT conversation somewhere in its answer (`benchmarks.attention_runs`). For each
batch, the variants run one after the other in each repeat (the median of 20 calls each, after 3); ratios are paired per
batch and repeat. "read" is the time to sum each row's own keys and values, what reading them costs at least. The
block mask, which the layers of a round would share, is timed apart. FlexAttention is compiled with `dynamic=True`
(with automatic dynamic shapes, torch 2.13's CPU kernel failed to compile once the number of rows changed).
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path

import torch
from litgpt import LLM
from litgpt.model import attend, attend_in_runs
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from benchmarks.attention_runs import arguments, batches_of_positions, conversations
from benchmarks.report import run_machine, write_results
from tools import smollm2

ROOT = Path(__file__).resolve().parent.parent
HEADS, GROUPS, HEAD_SIZE, CACHE, BLOCK = 3, 3, 64, 2048, 128


def block_mask(input_pos: torch.Tensor, length: int) -> BlockMask:
    """Each row's keys up to its position, in blocks of `BLOCK`: the blocks beyond a row's last position are skipped."""
    rows, tokens = input_pos.shape
    blocks = (input_pos.amax(1) // BLOCK + 1).to(torch.int32).view(rows, 1, 1)
    indices = torch.arange(-(-length // BLOCK), dtype=torch.int32).expand(rows, 1, 1, -1)

    def mask_mod(b, h, q_idx, kv_idx):
        return kv_idx <= input_pos[b, q_idx]

    return BlockMask.from_kv_blocks(blocks, indices, BLOCK_SIZE=BLOCK, mask_mod=mask_mod, seq_lengths=(tokens, length))


def median_ms(fn, calls: int = 20) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def compare(flex, sizes: list[tuple[int, int]], rows: int, batches: int, repeats: int, rng: random.Random) -> dict:
    cases = batches_of_positions(sizes, rows, batches, rng)
    scale = HEAD_SIZE**-0.5
    times = {"runs": [], "longest": [], "flex": [], "block mask": [], "read": []}
    ratios, largest_difference = [], 0.0
    for _ in range(repeats):
        for positions in cases:
            k, v = (torch.randn(rows, HEADS, CACHE, HEAD_SIZE) for _ in range(2))
            q = torch.randn(rows, HEADS * GROUPS, 1, HEAD_SIZE)
            input_pos = torch.tensor(positions).view(rows, 1)
            last = input_pos[:, 0]
            mask = torch.arange(CACHE).view(1, 1, 1, -1) <= input_pos.view(rows, 1, 1, 1)
            longest = int(last.max()) + 1
            runs = median_ms(lambda: attend_in_runs(q, k, v, mask, last, scale))
            times["runs"].append(runs)
            times["longest"].append(
                median_ms(lambda: attend(q, k[:, :, :longest], v[:, :, :longest], mask[..., :longest], scale))
            )
            mask_of_rows = block_mask(input_pos, CACHE)
            flex_ms = median_ms(lambda: flex(q, k, v, block_mask=mask_of_rows, scale=scale, enable_gqa=True))
            times["flex"].append(flex_ms)
            times["block mask"].append(median_ms(lambda: block_mask(input_pos, CACHE)))
            times["read"].append(
                median_ms(lambda: [float(t[b, :, : n + 1].sum()) for t in (k, v) for b, n in enumerate(positions)])
            )
            ratios.append(runs / flex_ms)
            flexed = flex(q, k, v, block_mask=mask_of_rows, scale=scale, enable_gqa=True)
            difference = (flexed - attend_in_runs(q, k, v, mask, last, scale)).abs().max()
            largest_difference = max(largest_difference, float(difference))
    return {
        "positions": cases,
        "ms": {name: statistics.median(values) for name, values in times.items()},
        "flex_speedup": {"median": statistics.median(ratios), "range": [min(ratios), max(ratios)]},
        "largest_difference": largest_difference,
    }


def markdown(results: dict) -> str:
    machine = results["machine"]
    lines = [f"# A decoding round's attention: SDPA in runs vs FlexAttention ({machine['date']})", ""]
    lines += [f"`{machine['command']}`", "", "Milliseconds of one layer (SmolLM2-135M has 30), medians.", ""]
    lines += ["| rows | mean position | ms, runs (today) | ms, all to the longest | ms, FlexAttention | ms, read"
              " | runs / FlexAttention: median (range) | largest difference | ms, block mask (a round) |"]  # fmt: skip
    lines += ["|---|---|---|---|---|---|---|---|---|"]
    for rows, result in results["rows"].items():
        ms, speedup = result["ms"], result["flex_speedup"]
        mean = statistics.mean(p for case in result["positions"] for p in case)
        lines.append(
            f"| {rows} | {mean:.0f} | {ms['runs']:.2f} | {ms['longest']:.2f} | {ms['flex']:.2f} | {ms['read']:.2f} |"
            f" {speedup['median']:.2f} ({speedup['range'][0]:.2f}–{speedup['range'][1]:.2f}) |"
            f" {result['largest_difference']:.1e} | {ms['block mask']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    args = arguments(__doc__.split("\n\n")[0], [8, 12, 16], "decode_attention")
    args.new_tokens = None  # attention alone
    torch.set_num_threads(args.threads)
    llm = LLM.load(str(smollm2.make_checkpoint(ROOT / "build" / "smollm2")), distribute=None)
    sizes = conversations(llm, 500)
    flex = torch.compile(flex_attention, dynamic=True)
    rng = random.Random(0)
    results = {"machine": run_machine(args, conversations=len(sizes)), "rows": {}}
    for rows in args.rows:
        results["rows"][rows] = compare(flex, sizes, rows, args.batches, args.repeats, rng)
    write_results(args.out, results, markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
