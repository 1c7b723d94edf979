"""The demo: speculative decoding on a target and a draft trained on the Zen of Python, through LitGPT's CLI and API.

    python -m demo.run [--out build/demo] [--max_new_tokens 60] [--speculative_k 4]

The first run trains both models in well under a minute on a CPU and caches them under --out. Each prompt goes
through `litgpt generate` (the target alone) and `litgpt generate_speculatively` (draft + target) at temperature 0;
then the first prompt goes through the Python API, `LLM.generate` with and without `draft_model=`. Last, one checkpoint
alone: a prompt that repeats the text, through `litgpt generate` with and without `--prompt_lookup true` (drafts
looked up in the prompt and the text so far, no draft model). The completions must be identical (the exit code is 1
if not).
"""

from __future__ import annotations

import argparse
import textwrap
import time
from pathlib import Path

from demo import cli, zen

PROMPTS = ["Beautiful is better than", "Errors should never", "If the implementation is hard to explain,"]
# the first lines of the text, then its first line again: the target goes on with lines that are in the prompt
LOOKUP_PROMPT = "\n".join(zen.zen_of_python().splitlines()[2:8] + [zen.zen_of_python().splitlines()[2]])


def python_api(draft_dir: Path, target_dir: Path, prompt: str, max_new_tokens: int) -> bool:
    """The completion of `prompt` through LitGPT's Python API, with speculative_k="auto", and without a draft."""
    from litgpt import LLM

    llm, draft = LLM.load(str(target_dir), distribute=None), LLM.load(str(draft_dir), distribute=None)
    for model in (llm, draft):
        model.distribute(accelerator="cpu", precision="32-true")  # as the CLI runs above
    kwargs = dict(max_new_tokens=max_new_tokens, temperature=0.0)
    timed = {}
    for name, extra in (("alone", {}), ("draft", dict(draft_model=draft, speculative_k="auto"))):
        llm.generate(prompt, **kwargs, **extra)  # warm-up
        t0 = time.perf_counter()
        ids = llm.generate(prompt, return_as_token_ids=True, **kwargs, **extra)
        timed[name] = (ids, ids.size(0) / (time.perf_counter() - t0))
    (alone, alone_speed), (spec, spec_speed) = timed["alone"], timed["draft"]
    same = alone.tolist() == spec.tolist()
    print(f"prompt: {prompt!r}")
    print(f"  llm.generate(prompt)                                          ({alone_speed:6.1f} tokens/s)")
    print(
        f'  llm.generate(prompt, draft_model=draft, speculative_k="auto")  ({spec_speed:6.1f} tokens/s, '
        f"acceptance rate {llm.acceptance_rate:.0%}):"
    )
    print(textwrap.indent(prompt + llm.preprocessor.decode(spec), "    | "))
    print(f"  identical: {'yes' if same else 'NO'}\n")
    return same


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
    print("Python API:\n")
    mismatches += not python_api(draft, target, PROMPTS[1], args.max_new_tokens)

    print("One checkpoint, drafts looked up in the prompt (a prompt that repeats the text):\n")
    alone = cli.generate(target, LOOKUP_PROMPT, *options)
    lookup = cli.generate(target, LOOKUP_PROMPT, *options, "--prompt_lookup", "true")
    same = alone.text == lookup.text
    mismatches += not same
    print(f"  litgpt generate                        ({alone.tokens_per_sec:6.1f} tokens/s)")
    print(f"  litgpt generate --prompt_lookup true   ({lookup.tokens_per_sec:6.1f} tokens/s):")
    print(textwrap.indent(lookup.text, "    | "))
    print(f"  identical: {'yes' if same else 'NO'}\n")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
