"""oneDNN's linear layers (what LitGPT's generation entry points use on the CPU in float32) against PyTorch's default
kernel: tokens/s of the target alone, and the cost of a forward pass over a few tokens per row.

    python -m benchmarks.onednn_linears [--repeats 3] [--threads 2] [--out DIR]

SmolLM2-135M-Instruct (tools/smollm2.py), float32, greedy, up to 128 new tokens: `LLM.generate` of the eight chat
prompts of tools/smollm2.py one at a time and as lists of 4 and of 8, with the model's linear layers as
`nn.Linear` and as `OneDNNLinear`, interleaved and paired repeat by repeat (the order alternating); and the median
milliseconds of a forward pass of 1 to 4 tokens per row at position 200, at 1 and 4 rows. The answers of the two
kernels are compared too: they round differently, so a near tie may go another way.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from litgpt import LLM
from litgpt import model as litgpt_model
from litgpt.model import OneDNNLinear, use_onednn_linears

from benchmarks.report import run_machine, summary, write_results
from tools import smollm2

ROOT = Path(__file__).resolve().parent.parent


def use(model: torch.nn.Module, onednn: bool) -> None:
    """The model's linear layers as `OneDNNLinear`s or as `nn.Linear`s."""
    if onednn:
        use_onednn_linears(model)
    else:
        for layer in model.modules():
            if type(layer) is OneDNNLinear:
                layer.__class__ = torch.nn.Linear


@torch.inference_mode()
def pass_ms(model, rows: int, tokens: int, position: int = 200, repeats: int = 20) -> float:
    """The median milliseconds of a forward pass of `tokens` tokens per row at `position`."""
    model.set_kv_cache(batch_size=rows, max_seq_length=position + 8)
    idx = torch.randint(0, model.config.vocab_size, (rows, position + tokens))
    model(idx[:, :position], input_pos=torch.arange(position))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model(idx[:, position:], input_pos=torch.arange(position, position + tokens), input_pos_maxp1=position + tokens)
        times.append(time.perf_counter() - start)
    model.clear_kv_cache()
    return statistics.median(times) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu" / "onednn_linears")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    # the kernel is this benchmark's to choose, not `set_kv_cache`'s
    litgpt_model.use_onednn_linears = lambda module: None
    llm = LLM.load(str(smollm2.make_checkpoint(ROOT / "build" / "smollm2")), distribute=None)
    llm.distribute(accelerator="cpu", precision="32-true")
    model = llm.model.module
    prompts = list(smollm2.PROMPTS)
    cases = [(p, p) for p in prompts] + [(f"batch of {n}", prompts[:n]) for n in (4, 8)]
    llm.generate(prompts[0], max_new_tokens=4)  # the first call is slower: not measured

    ratios = {name: [] for name, _ in cases}
    speeds = {name: {"default": [], "oneDNN": []} for name, _ in cases}
    same = {name: True for name, _ in cases}
    for repeat in range(args.repeats):
        for i, (name, prompt) in enumerate(cases):
            order = ("default", "oneDNN") if (repeat + i) % 2 == 0 else ("oneDNN", "default")
            answers = {}
            for variant in order:
                use(model, variant == "oneDNN")
                start = time.perf_counter()
                answers[variant] = llm.generate(prompt, max_new_tokens=args.new_tokens, temperature=0)
                seconds = time.perf_counter() - start
                texts = answers[variant] if isinstance(answers[variant], list) else [answers[variant]]
                speeds[name][variant].append(sum(len(llm.preprocessor.encode(t)) for t in texts) / seconds)
            same[name] &= answers["default"] == answers["oneDNN"]
            ratios[name].append(speeds[name]["oneDNN"][-1] / speeds[name]["default"][-1])
            print(f"repeat {repeat + 1}: {name[:50]}: {ratios[name][-1]:.2f}x", file=sys.stderr)
    passes = {}
    for variant in ("default", "oneDNN"):
        use(model, variant == "oneDNN")
        passes[variant] = {rows: [pass_ms(model, rows, tokens) for tokens in (1, 2, 3, 4)] for rows in (1, 4)}

    results = {"machine": run_machine(args), "ratios": ratios, "speeds": speeds, "same": same, "pass_ms": passes}
    write_results(args.out, results, markdown(results))
    return 0


def markdown(results: dict) -> str:
    machine = results["machine"]
    lines = [
        f"# oneDNN's linear layers over PyTorch's default kernel ({machine['date']}, {machine['threads']} threads)",
        "",
        f"`{machine['command']}`",
        "",
        "| case | with oneDNN over the default, tokens/s, paired: median (quartiles) | default, tokens/s | same |",
        "|---|---|---|---|",
    ]
    for name, values in results["ratios"].items():
        default = statistics.median(results["speeds"][name]["default"])
        lines.append(f"| {name} | {summary(values)} | {default:.1f} | {'yes' if results['same'][name] else 'no'} |")
    lines += ["", "| forward pass, ms (1, 2, 3, 4 tokens per row) | default | oneDNN |", "|---|---|---|"]
    for rows in results["pass_ms"]["default"]:
        default, onednn = results["pass_ms"]["default"][rows], results["pass_ms"]["oneDNN"][rows]
        lines.append(
            f"| {rows} row(s) | {', '.join(f'{ms:.1f}' for ms in default)} | {', '.join(f'{ms:.1f}' for ms in onednn)}"
            f" |"
        )
    one = [statistics.median(v) for name, v in results["ratios"].items() if not name.startswith("batch")]
    lines += ["", f"One prompt: median {statistics.median(one):.2f}x, lowest {min(one):.2f}x."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
