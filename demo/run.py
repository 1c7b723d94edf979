"""The demo: speculative decoding on a target and a draft trained on the Zen of Python, through LitGPT's own CLI.

    python demo/run.py [--out build/demo] [--max_new_tokens 60] [--speculative_k 4]

The first run trains both models in well under a minute on a CPU and caches them under --out. Each prompt goes
through `litgpt generate` (the target alone) and `litgpt generate_speculatively` (draft + target) at temperature 0:
the two completions must be identical (the exit code is 1 if not).
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

import cli
import zen

PROMPTS = ["Beautiful is better than", "Errors should never", "If the implementation is hard to explain,"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "build" / "demo")
    parser.add_argument("--max_new_tokens", type=int, default=60)
    parser.add_argument("--speculative_k", type=int, default=4)
    args = parser.parse_args()

    draft, target = zen.build_zen_pair(args.out)
    print(f"target: {target}\ndraft:  {draft}\n")
    options = ["--temperature", "0", "--precision", "32-true", "--max_new_tokens", str(args.max_new_tokens)]
    mismatches = 0
    for prompt in PROMPTS:
        alone = cli.generate(target, prompt, *options)
        spec = cli.generate_speculatively(draft, target, prompt, *options, "--speculative_k", str(args.speculative_k))
        same = alone.text == spec.text
        mismatches += not same
        print(f"prompt: {prompt!r}")
        print(f"  litgpt generate                 ({alone.tokens_per_sec:6.1f} tokens/s):")
        print(textwrap.indent(alone.text, "    | "))
        print(
            f"  litgpt generate_speculatively   ({spec.tokens_per_sec:6.1f} tokens/s, "
            f"acceptance rate {spec.acceptance_rate:.0%}, k={args.speculative_k}):"
        )
        print(textwrap.indent(spec.text, "    | "))
        print(f"  identical: {'yes' if same else 'NO'}\n")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
