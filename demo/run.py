"""The demo: tiny checkpoints through ``litgpt generate`` and ``litgpt generate_speculatively``, side by side.

    python demo/run.py [--out build/demo] [--max_new_tokens 24] [--speculative_k 3]

At temperature 0 speculative decoding must return exactly what the target model alone returns.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cli
import tiny_checkpoints

PROMPTS = ["the llama eats", "a small alpaca runs in the field", "green grass and snow"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "build" / "demo")
    parser.add_argument("--max_new_tokens", type=int, default=24)
    parser.add_argument("--speculative_k", type=int, default=3)
    args = parser.parse_args()

    draft, target = tiny_checkpoints.build_pair(args.out)
    print(f"tiny checkpoints: target {target} (2 layers), draft {draft} (its first layer, a sharper head)\n")
    options = ["--temperature", "0", "--precision", "32-true", "--max_new_tokens", str(args.max_new_tokens)]
    mismatches = 0
    for prompt in PROMPTS:
        alone = cli.generate(target, prompt, *options)
        spec = cli.generate_speculatively(draft, target, prompt, *options, "--speculative_k", str(args.speculative_k))
        same = alone.text == spec.text
        mismatches += not same
        print(f"prompt: {prompt!r}")
        print(f"  litgpt generate                : {alone.text}")
        print(f"  litgpt generate_speculatively  : {spec.text}")
        print(f"  identical: {'yes' if same else 'NO'}   acceptance rate: {spec.acceptance_rate:.0%}\n")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
