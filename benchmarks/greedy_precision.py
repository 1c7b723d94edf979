"""How often is greedy speculative output token for token the target's own, in float32 and in 16-bit precision?

    python -m benchmarks.greedy_precision [--device cpu] [--out benchmarks/results/cpu]

Speculative decoding verifies k + 1 tokens in one forward pass of the target; target-only decoding feeds one token at
a time. In exact arithmetic both give the same logits. In floating point they round differently, so where the two
most likely tokens are nearly tied, the verification's argmax can be the other one. Each emitted token is still the
target's argmax as computed by the verification pass. For the benchmark's pairs (see pairs.py), the demo's Zen pair
and a real pretrained model (SmolLM2-135M-Instruct with a draft of its first 4 blocks, eight chat prompts, stopping at
<|im_end|>), in float32 and bfloat16, with k = 4: the share of prompts whose 64 new tokens are identical to
target-only greedy decoding, and the median position of the first difference among the others.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
from pathlib import Path

import litgpt.generate.base as base
import litgpt.generate.speculative_decoding as fork
import torch

from benchmarks import pairs, timing

ROOT = Path(__file__).resolve().parent.parent
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
ZEN_PROMPTS = [
    "Beautiful is",
    "Explicit is better",
    "Simple is",
    "Flat is better than",
    "Readability",
    "Errors should never",
    "In the face of",
    "Now is better",
]


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The index of the first token that differs, or where the shorter ends (one stopped earlier); None if equal."""
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


@torch.inference_mode()
def compare(
    draft, target, prompts: list[torch.Tensor], new_tokens: int, speculative_k: int, eos_id: int | None = None
) -> dict:
    """Greedy output of both ways for each prompt; with `eos_id`, each stops there (as the CLIs do)."""
    differences = []
    stop_tokens = ([eos_id],) if eos_id is not None else ()
    for prompt in prompts:
        max_returned = prompt.numel() + new_tokens
        timing.fresh_cache(target, max_seq_length=max_returned)
        alone = base.generate(target, prompt, max_returned, temperature=0.0, eos_id=eos_id)[prompt.numel() :].tolist()
        if alone and alone[-1] == eos_id:
            alone.pop()  # base.generate returns the eos, speculative generate does not
        timing.fresh_cache(draft, target, max_seq_length=max_returned)
        out, _ = fork.generate(
            draft, target, prompt, max_returned, temperature=0.0, speculative_k=speculative_k, stop_tokens=stop_tokens
        )
        differences.append(first_difference(alone, out[prompt.numel() :].tolist()))
    diverged = [d for d in differences if d is not None]
    return {
        "identical": len(differences) - len(diverged),
        "prompts": len(differences),
        "first_differences": diverged,
        "median_first_difference": statistics.median(diverged) if diverged else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--speculative-k", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="a tiny configuration for a smoke test")
    args = parser.parse_args()
    device = torch.device(args.device)
    n_layer, vocab, noises, n_prompts = (
        (2, 256, (0.0, 0.05), 2) if args.quick else (8, 4096, (0.0, 0.001, 0.0025, 0.005), 8)
    )
    config_name = "pythia-14m" if args.quick else "pythia-160m"

    rows = []
    for dtype_name, dtype in DTYPES.items():
        config = pairs.target_config(config_name, 16 + args.new_tokens + 16, n_layer=n_layer, vocab=vocab)
        draft, target = pairs.controlled_pair(config, device, dtype)
        generator = torch.Generator().manual_seed(1234)
        prompts = [torch.randint(0, vocab, (16,), generator=generator).to(device) for _ in range(n_prompts)]
        for noise in noises:
            pairs.set_noise(target, noise)
            result = compare(draft, target, prompts, args.new_tokens, args.speculative_k)
            rows.append({"pair": f"{config.name} ×{n_layer}, noise {noise}", "dtype": dtype_name, **result})
            print(rows[-1], flush=True)
        zen_draft, zen_target, tokenizer = pairs.zen_pair(device, dtype)
        zen_prompts = [tokenizer.encode(p, device=device) for p in ZEN_PROMPTS[:n_prompts]]
        result = compare(zen_draft, zen_target, zen_prompts, args.new_tokens, args.speculative_k)
        rows.append({"pair": "demo (Zen of Python)", "dtype": dtype_name, **result})
        print(rows[-1], flush=True)
        if not args.quick:
            # a real pretrained model with its chat template, stopping at <|im_end|>
            real_draft, real_target, tokenizer, real_prompts = pairs.smollm2_pair(device, dtype)
            result = compare(
                real_draft, real_target, real_prompts, args.new_tokens, args.speculative_k, tokenizer.eos_id
            )
            rows.append({"pair": "SmolLM2-135M-Instruct, draft: its first 4 blocks", "dtype": dtype_name, **result})
            print(rows[-1], flush=True)

    machine = {
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "speculative_k": args.speculative_k,
        "new_tokens": args.new_tokens,
    }
    out = args.out or ROOT / "benchmarks" / "results" / device.type
    out.mkdir(parents=True, exist_ok=True)
    (out / "precision.json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=1))
    lines = [
        f"# Greedy speculative output against target-only output, {machine['date']}",
        "",
        f"{machine['device']}, torch {machine['torch']}; k = {args.speculative_k}, {args.new_tokens} new tokens per "
        "prompt. First difference: the index of the first generated token that differs (0 = the first new token).",
        "",
        "| pair | dtype | identical | median first difference (of the others) |",
        "|---|---|---|---|",
    ]
    for row in rows:
        median = row["median_first_difference"]
        lines.append(
            f"| {row['pair']} | {row['dtype']} | {row['identical']}/{row['prompts']} "
            f"| {'–' if median is None else median} {row['first_differences'] or ''} |"
        )
    (out / "precision.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'precision.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
