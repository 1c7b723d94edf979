"""Replay speculative generations under a deterministic clock and write down every round, to compare two builds.

    python -m tools.replay_rounds --out before.json    # with one build of the fork installed (or PYTHONPATH=...)
    python -m tools.replay_rounds --out after.json     # with the other; then: cmp before.json after.json

Each forward pass advances the clock that the length choosers read (`time.perf_counter`) by a fixed cost per model
and token, so a run decides the same way every time: what `speculative_k="auto"` chose, what was proposed (by the
draft model or looked up), what was accepted, and the tokens, are then a function of the code alone. A refactor that
leaves the behaviour as it was gives a byte-identical file. Rounds are seen through the names that upstream's tests
patch in `litgpt.generate.speculative_decoding` (`speculative_decoding`, `verify`, `next_token`).

SmolLM2-135M-Instruct (tools/smollm2.py) and a draft of its first 4 blocks, float32, on the CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from litgpt import GPT, Config, Tokenizer
from litgpt.generate import speculative_decoding as sd

from tools import smollm2

ROOT = Path(__file__).resolve().parent.parent

PROMPT = (
    "<|im_start|>user\nRepeat this list, then add one more fruit in the same format:\n"
    "- apple: red, sweet\n- lemon: yellow, sour\n- lime: green, sour\n- grape: purple, sweet<|im_end|>\n"
    "<|im_start|>assistant\n"
)
# (name, draft model?, speculative_k, prompt_lookup, temperature)
GENERATIONS = [
    ("lookup alone, auto", False, "auto", True, 0.0),
    ("draft and lookup, auto", True, "auto", True, 0.0),
    ("draft and lookup, auto, sampled", True, "auto", True, 0.8),
    ("draft, auto", True, "auto", False, 0.0),
    ("draft, k=3", True, 3, False, 0.0),
    ("lookup alone, k=6, sampled", False, 6, True, 0.8),
]
COST = {"target": (1.0, 0.02), "draft": (0.2, 0.005)}  # seconds per forward pass, and per token in it


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def load(checkpoint_dir: Path, max_seq_length: int) -> GPT:
    model = GPT(Config.from_file(checkpoint_dir / "model_config.yaml"))
    model.load_state_dict(torch.load(checkpoint_dir / "lit_model.pth", weights_only=True))
    model.max_seq_length = max_seq_length
    model.set_kv_cache(batch_size=1)
    return model.eval()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--new-tokens", type=int, default=96)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    checkpoint_dir = smollm2.make_checkpoint(ROOT / "build" / "smollm2")
    draft_dir = checkpoint_dir.with_name(f"{checkpoint_dir.name}-first4")
    tokenizer = Tokenizer(checkpoint_dir)
    prompt = tokenizer.encode(PROMPT)
    max_returned_tokens = prompt.size(0) + args.new_tokens
    models = {"target": load(checkpoint_dir, max_returned_tokens), "draft": load(draft_dir, max_returned_tokens)}

    clock, rounds = Clock(), []
    for name, model in models.items():
        base, per_token = COST[name]

        def tick(module, positional, keywords, base=base, per_token=per_token):
            idx = keywords.get("idx", positional[0] if positional else None)
            clock.now += base + per_token * idx.size(-1)

        model.register_forward_pre_hook(tick, with_kwargs=True)

    originals = {name: getattr(sd, name) for name in ("speculative_decoding", "verify", "next_token")}
    depth = [0]

    def recorded(kind):
        def call(*positional, **keywords):
            depth[0] += 1
            try:
                result = originals[kind](*positional, **keywords)
            finally:
                depth[0] -= 1
            if kind == "verify" and depth[0]:  # the draft model's round verifies through `verify` too
                return result
            if kind == "next_token":
                rounds.append(["target", 1, 0])
            elif kind == "speculative_decoding":
                rounds.append(["draft", keywords.get("speculative_k"), len(result) - 1])
            else:
                proposal = keywords.get("proposal", positional[2] if len(positional) > 2 else None)
                rounds.append(["lookup", len(proposal), len(result) - 1])
            return result

        return call

    for kind in originals:
        setattr(sd, kind, recorded(kind))
    real_perf_counter, time.perf_counter = time.perf_counter, clock

    report = []
    try:
        for name, with_draft, speculative_k, prompt_lookup, temperature in GENERATIONS:
            cache = sd.LookupCache()
            auto = sd.AutoSpeculativeK(8) if speculative_k == "auto" else speculative_k
            for repeat in range(2):  # the second continues from what the first measured and generated
                for model in models.values():
                    model.clear_kv_cache()
                    model.set_kv_cache(batch_size=1)
                torch.manual_seed(1234)
                rounds.clear()
                start = clock.now
                output, acceptance_rate = sd.generate(
                    models["draft"] if with_draft else None,
                    models["target"],
                    prompt,
                    max_returned_tokens,
                    temperature=temperature,
                    top_k=50,
                    stop_tokens=([tokenizer.eos_id],),
                    include_prompt=False,
                    speculative_k=auto,
                    prompt_lookup=prompt_lookup,
                    lookup_cache=cache if prompt_lookup else None,
                )
                report.append(
                    {
                        "generation": name,
                        "repeat": repeat,
                        "tokens": output.tolist(),
                        "acceptance_rate": round(acceptance_rate, 12),
                        "clock": round(clock.now - start, 9),
                        "rounds": [list(r) for r in rounds],
                    }
                )
                print(f"{name} #{repeat}: {len(output)} tokens in {len(rounds)} rounds", file=sys.stderr)
    finally:
        time.perf_counter = real_perf_counter
        for kind, original in originals.items():
            setattr(sd, kind, original)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
