"""A/B: the draft's extra forward after a fully accepted round, or its last token fed with the next round's first.

    python benchmarks/pending_draft_token.py [--repeats 5] [--out benchmarks/results/cpu]

When all k draft tokens of a round are accepted, the draft model has not been fed its own last token, which the next
round needs in its KV cache. The installed fork (A) runs one more one-token draft forward for it. B (built here by
editing a copy of the module, not a patch) instead feeds it together with the next round's first token, in one
two-token forward. On the benchmark's pairs (pairs.py), greedy, k = 1..8, interleaved: the time of B over the time of
A per (alpha, k). B becomes a patch only if no cell is slower beyond noise and it gains at alpha >= 0.86.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import litgpt.generate.speculative_decoding as fork
import torch

import pairs
import timing

ROOT = Path(__file__).resolve().parent.parent

# B: no extra forward in speculative_decoding; generate_fn passes the last accepted draft token as draft_prefix
EDITS = [
    (
        """    # If all draft tokens were accepted:
    # 1. Update draft model's key-value cache
    # 2. Sample one more token from target model
    sample_next_token(
        draft_model,
        draft_token,
        draft_input_pos,
        target_vocab_size,
        input_pos_maxp1=draft_input_pos_maxp1,
        **sample_kwargs,
    )
""",
        "",
    ),
    (
        """            draft_prefix = []

""",
        """            draft_prefix = [new_tokens[-2:-1]] if len(new_tokens) == _speculative_k + 1 else []

""",
    ),
]


def variant_b():
    source = Path(fork.__file__).read_text()
    for old, new in EDITS:
        if source.count(old) != 1:
            raise RuntimeError(f"cannot build variant B: the installed module has changed near {old[:60]!r}")
        source = source.replace(old, new)
    path = ROOT / "build" / "pending_draft_token_b.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(source)
    return timing.load_module_copy(path, "speculative_decoding_b")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu")
    args = parser.parse_args()
    modules = {"A": fork, "B": variant_b()}
    new_tokens, ks, noises = 128, range(1, 9), (0.0, 0.001, 0.0025, 0.005)
    config = pairs.target_config("pythia-160m", 16 + new_tokens + 16, n_layer=8, vocab=4096)
    draft, target = pairs.controlled_pair(config, torch.device("cpu"), torch.float32)
    prompt = torch.randint(0, 4096, (16,), generator=torch.Generator().manual_seed(1234))
    max_returned = 16 + new_tokens
    rows = []
    for noise in noises:
        pairs.set_noise(target, noise)
        for k in ks:
            times: dict = {"A": [], "B": []}
            outputs = {}
            for repeat in range(args.repeats):
                for name in ("A", "B") if repeat % 2 == 0 else ("B", "A"):
                    timing.fresh_cache(draft, target, max_seq_length=max_returned)
                    (out, _), secs = timing.seconds(
                        lambda m=modules[name]: m.generate(
                            draft, target, prompt, max_returned, temperature=0.0, speculative_k=k
                        ),
                        torch.device("cpu"),
                    )
                    times[name].append(secs)
                    outputs[name] = out
            assert torch.equal(outputs["A"], outputs["B"]), (noise, k)
            ratio = statistics.median(times["B"]) / statistics.median(times["A"])
            spread = max(
                (max(t) - min(t)) / statistics.median(t) / 2 for t in times.values()
            )  # half the min-max spread, the larger of A and B
            rows.append({"noise": noise, "k": k, "b_over_a": ratio, "spread": spread})
            print(rows[-1], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "pending_draft_token.json").write_text(json.dumps(rows, indent=1))
    lines = [
        "# A/B: the draft's extra forward (A, the fork) or its last token fed with the next round's (B)",
        "",
        f"Greedy, {new_tokens} new tokens, {args.repeats} interleaved repeats; time of B / time of A (< 1: B faster), "
        "± half the min-max spread of the noisier of the two.",
        "",
        "| noise | " + " | ".join(f"k = {k}" for k in ks) + " |",
        "|---|" + "---|" * len(ks),
    ]
    for noise in noises:
        cells = [f"{r['b_over_a']:.3f} ±{r['spread']:.0%}" for r in rows if r["noise"] == noise]
        lines.append(f"| {noise} | " + " | ".join(cells) + " |")
    (args.out / "pending_draft_token.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
