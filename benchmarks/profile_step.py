"""Where a step of the continuous batching engine spends its time: torch.profiler over its decoding rounds and over a
round in which a prompt joins, at 1, 8 and 16 rows.

    python -m benchmarks.profile_step [--rows 1 8 16] [--threads 2] [--out DIR]

SmolLM2-135M-Instruct (tools/smollm2.py), float32, greedy, the model alone (no proposals). The rows' prompts are the
chat prompts of tools/smollm2.py, of different lengths, each repeated to 100-400 tokens, so that the rows are padded
to the longest as in a server. After every row joined and 8 rounds, 16 decoding rounds are profiled; then one row
leaves and a new prompt of 256 tokens joins (its prefill, a pass of its own, which the other rows wait for). The
table gives the share of each kind of operator in the profiled time (self CPU time, grouped) and the milliseconds of
a round.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from litgpt import LLM
from litgpt.generate.continuous_batching import ContinuousBatch, Request

from benchmarks.report import run_machine, write_results
from tools import smollm2

ROOT = Path(__file__).resolve().parent.parent

ELEMENTWISE = tuple(f"aten::{op}" for op in ("mul", "add", "rsqrt", "pow", "mean", "silu", "neg", "sub", "div"))
# operator name -> the group it is counted in, first match
GROUPS = (
    ("linear (oneDNN)", ("mkldnn::_linear_pointwise",)),
    ("linear (aten)", ("aten::addmm", "aten::mm", "aten::linear", "aten::matmul", "aten::bmm")),
    ("attention", ("aten::_scaled_dot_product", "aten::scaled_dot_product")),
    ("KV cache writes", ("aten::index_put", "aten::index_copy", "aten::scatter")),
    ("copies", ("aten::copy_", "aten::cat", "aten::clone", "aten::contiguous", "aten::to", "aten::_to_copy")),
    ("elementwise (norms, rotary, SwiGLU)", ELEMENTWISE),
    ("sampling", ("aten::argmax", "aten::softmax", "aten::topk", "aten::sort", "aten::multinomial")),
)


def group(name: str) -> str:
    for label, prefixes in GROUPS:
        if name.startswith(prefixes):
            return label
    return "other"


def profile(fn) -> tuple[dict[str, float], float]:
    """The self CPU milliseconds of `fn()` per operator group, and its wall milliseconds."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        fn()
        wall = (time.perf_counter() - start) * 1e3
    groups: dict[str, float] = {}
    for event in prof.key_averages():
        groups[group(event.key)] = groups.get(group(event.key), 0.0) + event.self_cpu_time_total / 1e3
    return groups, wall


def prompt_tokens(llm: LLM, i: int, length: int) -> torch.Tensor:
    tokens = llm.preprocessor.encode(llm.prompt_style.apply(smollm2.PROMPTS[i % len(smollm2.PROMPTS)]))
    return tokens.repeat(length // tokens.size(0) + 1)[:length]


@torch.inference_mode()
def profile_rows(llm: LLM, rows: int, rounds: int = 16) -> dict:
    model = llm.model.module if hasattr(llm.model, "module") else llm.model
    batch = ContinuousBatch(model, max_batch_size=rows, max_seq_length=1024, speculative_k="auto")
    lengths = [100 + 300 * i // max(rows - 1, 1) for i in range(rows)]
    requests = [Request(prompt_tokens(llm, i, n), 400, temperature=0.0) for i, n in enumerate(lengths)]
    while len(batch.rows) < rows:
        batch.join(requests[len(batch.rows) : len(batch.rows) + batch.joining(requests[len(batch.rows) :])])
    for _ in range(8):
        batch.step()
    decode, wall = profile(lambda: [batch.step() for _ in range(rounds)])
    batch.remove(batch.rows[0])
    joining = Request(prompt_tokens(llm, rows, 256), 400, temperature=0.0)
    join, join_wall = profile(lambda: (batch.join([joining]), batch.step()))
    batch.clear()
    return {"decode": decode, "decode_round_ms": wall / rounds, "join": join, "join_round_ms": join_wall}


def markdown(results: dict) -> str:
    machine = results["machine"]
    lines = [f"# Where a round of the engine spends its time ({machine['date']}, {machine['threads']} threads)", ""]
    lines += [f"`{machine['command']}`", "", "Self CPU time per group of operators, under torch.profiler.", ""]
    lines += ["| rows | round | ms | " + " | ".join(label for label, _ in GROUPS) + " | other |"]
    lines += ["|---" * (len(GROUPS) + 4) + "|"]
    for rows, result in results["rows"].items():
        for kind in ("decode", "join"):
            groups = result[kind]
            total = sum(groups.values())
            shares = [f"{100 * groups.get(label, 0.0) / total:.0f}%" for label, _ in GROUPS] + [
                f"{100 * groups.get('other', 0.0) / total:.0f}%"
            ]
            lines.append(f"| {rows} | {kind} | {result[f'{kind}_round_ms']:.1f} | " + " | ".join(shares) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8, 16])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu" / "profile_step")
    args = parser.parse_args()
    args.new_tokens = None  # each row generates as long as it is profiled
    torch.set_num_threads(args.threads)
    llm = LLM.load(str(smollm2.make_checkpoint(ROOT / "build" / "smollm2")), distribute=None)
    llm.distribute(accelerator="cpu", precision="32-true")
    results = {"machine": run_machine(args), "rows": {rows: profile_rows(llm, rows) for rows in args.rows}}
    write_results(args.out, results, markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
