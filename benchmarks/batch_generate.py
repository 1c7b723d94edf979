"""A list of prompts through `LLM.generate` at once (continuous batching) against a loop over them, with and without
prompt lookup, and with a draft model that cannot pay.

    python -m benchmarks.batch_generate [--prompts 8] [--repeats 3] [--threads 1] [--out benchmarks/results/cpu]
        [--variants VARIANT ...] [--kind copy|open]

SmolLM2-135M-Instruct (tools/smollm2.py), float32, greedy, up to 128 new tokens per prompt, the chat prompts of
benchmarks/prompt_lookup_tasks.json (the first `--prompts`: answers that copy from the prompt, then open ones), or
with `--kind held-out` the eight chat prompts of tools/smollm2.py, open and in no task set. Seven variants, interleaved
within each repeat (their order rotates from repeat to repeat): a loop of `llm.generate(prompt)`,
`llm.generate(prompts)`, both with `prompt_lookup=True` (`lookup_cache_tokens=0`: each answer looks up its own
prompt and text only) and with SmolLM2's first 4 blocks as draft model (`speculative_k="auto"`), which accepts too few
tokens to pay: each must choose not to draft; and the batch with lookup and the draft. Each variant is compared
with the loop and with the variant without its last ` + ...` (the batch with lookup and the draft: with lookup). The
speed of a variant is the new tokens of all prompts over the seconds of the whole call or loop; ratios are paired
repeat by repeat. Every variant's answers must equal the loop's. `--variants` runs only those named (say "batch"
"batch + draft", to pair two of them more often); `--kind` takes the prompts of one kind only, repeated as needed. The
seconds of the batch's rounds with and without lookup are also counted in rounds of one token of the full batch at each
call's own cost of them (`round_equivalents`), which takes out the machine's swings between calls; and the rounds in
which the draft model drafted are counted per variant (`draft_rounds`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import resource
import statistics
import sys
import time
from pathlib import Path

import torch
from litgpt import LLM
from litgpt.generate import continuous_batching

from benchmarks.report import run_machine, summary
from tools import layer_draft, smollm2

ROOT = Path(__file__).resolve().parent.parent

TASKS = ROOT / "benchmarks" / "prompt_lookup_tasks.json"
VARIANTS = (
    "loop",
    "batch",
    "loop + lookup",
    "batch + lookup",
    "loop + draft",
    "batch + draft",
    "batch + lookup + draft",
)


def round_equivalents(rounds: list[tuple[int, int, float]], reference: list[tuple[int, int, float]] = ()) -> float:
    """The seconds of a batch's rounds (batch size, tokens per row, seconds) in rounds of one token of the largest batch
    size that has some, at the median seconds of those in the same call, or in `reference` (the batch without lookup
    in the same repeat) if every round of the call proposed tokens. This takes out the machine's swings from call to
    call, assuming that they slow every round of a call alike."""

    def plain(rounds: list[tuple[int, int, float]]) -> dict[int, list[float]]:
        sizes = {}
        for size, length, seconds in rounds:
            if length == 1:
                sizes.setdefault(size, []).append(seconds)
        return sizes

    sizes = plain(rounds) or plain(reference)
    if not sizes:
        return float("nan")  # no round of one token to count in
    return sum(seconds for _, _, seconds in rounds) / statistics.median(sizes[max(sizes)])


def run(
    llm: LLM, draft: LLM, variant: str, prompts: list[str], new_tokens: int, batch_size: int
) -> tuple[list[list[int]], float, list[tuple[int, int, float]], int]:
    """The answers (token ids) of one variant, its seconds, the rounds of a batch as its chooser timed them (batch
    size, tokens per row, seconds; the draft model's catching up on a row's text is not in them) and how many of them
    the draft model drafted in."""
    kwargs = dict(max_new_tokens=new_tokens, temperature=0.0, return_as_token_ids=True)
    if "lookup" in variant:
        kwargs.update(prompt_lookup=True, lookup_cache_tokens=0)
    if "draft" in variant:
        kwargs.update(draft_model=draft, speculative_k="auto")
    rounds, drafted = [], []
    chooser = continuous_batching.BatchLengthChooser
    timed, timed_draft = chooser.update, chooser.update_draft

    def update(self, batch_size: int, length: int, seconds: float) -> None:
        rounds.append((batch_size, length, seconds))
        timed(self, batch_size, length, seconds)

    def update_draft(self, batch_size: int, steps: int, seconds: float) -> None:
        drafted.append(steps)
        timed_draft(self, batch_size, steps, seconds)

    chooser.update, chooser.update_draft = update, update_draft
    start = time.perf_counter()
    try:
        if variant.startswith("batch"):
            answers = llm.generate(prompts, max_batch_size=batch_size, **kwargs)
        else:
            answers = [llm.generate(prompt, **kwargs) for prompt in prompts]
    finally:
        chooser.update, chooser.update_draft = timed, timed_draft
    return [answer.tolist() for answer in answers], time.perf_counter() - start, rounds, len(drafted)


def markdown(results: dict) -> str:
    machine, records = results["machine"], results["records"]
    variants = [v for v in VARIANTS if v in records[0]["seconds"]]
    speeds = {v: [r["tokens"] / r["seconds"][v] for r in records] for v in variants}
    lines = [
        f"# {machine['prompts']} prompts{f' ({kind})' if (kind := machine.get('kind')) else ''} through `LLM.generate`"
        f" at once against a loop ({machine['date']})",
        "",
        f"`{machine['command']}`: SmolLM2-135M-Instruct, float32, greedy, up to {machine['new_tokens']} new tokens per"
        f" prompt, {machine['threads']} thread(s), {machine['repeats']} interleaved repeats, {records[0]['tokens']}"
        f" new tokens in all per variant; median (quartiles) over repeats. Peak RSS {machine['peak_rss_mib']} MiB.",
        "",
        "| variant | tokens/s | over the loop (paired) | over the variant without its last ` + ...` (paired) |",
        "|---|---|---|---|",
    ]
    for variant in variants:
        over_loop = [s / loop for s, loop in zip(speeds[variant], speeds["loop"])] if "loop" in speeds else None
        without = variant.rsplit(" + ", 1)[0]
        paired = without != variant and without in speeds
        over_without = [s / w for s, w in zip(speeds[variant], speeds[without])] if paired else None
        lines.append(
            f"| {variant} | {summary(speeds[variant])} | {summary(over_loop) if over_loop else '—'} |"
            f" {summary(over_without) if over_without else '—'} |"
        )
    if all({"batch", "batch + lookup"} <= set(r.get("round_equivalents", {})) for r in records):
        equivalents = [r["round_equivalents"] for r in records]
        lines += [
            "",
            "The seconds of the rounds in rounds of one token of the full batch, at the median seconds of those in the"
            f" same call (`round_equivalents`): the batch {summary([e['batch'] for e in equivalents])}, with lookup"
            f" {summary([e['batch + lookup'] for e in equivalents])}; lookup over the batch alone, paired:"
            f" {summary([e['batch'] / e['batch + lookup'] for e in equivalents])}. Rounds: the batch"
            f" {summary([r['rounds']['batch'] for r in records])}, with lookup"
            f" {summary([r['rounds']['batch + lookup'] for r in records])}.",
        ]
    drafting = [v for v in variants if "draft" in v and "draft_rounds" in records[0]]
    if drafting:
        lines += [
            "",
            "Rounds in which the draft model drafted, per repeat: "
            + "; ".join(f"{v} {', '.join(str(r['draft_rounds'][v]) for r in records)}" for v in drafting)
            + ".",
        ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu")
    parser.add_argument("--quick", action="store_true", help="3 prompts, 8 new tokens, one repeat")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=VARIANTS, help="those to run (all)")
    parser.add_argument(
        "--kind",
        choices=("copy", "open", "held-out"),
        help="only the prompts of this kind, repeated as needed; held-out: tools/smollm2.py's chat prompts",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.quick:
        args.prompts, args.new_tokens, args.repeats = 3, 8, 1
    tasks = [task for task in json.loads(TASKS.read_text())["tasks"] if args.kind in (None, task["kind"])]
    if args.kind == "held-out":
        tasks = [{"prompt": prompt} for prompt in smollm2.PROMPTS]
    prompts = [task["prompt"] for task in itertools.islice(itertools.cycle(tasks), args.prompts)]
    checkpoint_dir = smollm2.make_checkpoint(ROOT / "build" / "smollm2")
    draft_dir = layer_draft.make_draft(checkpoint_dir, 4)  # made once, as `tools/smollm2.py --draft-layers 4` does
    llm, draft = (LLM.load(str(path), distribute=None) for path in (checkpoint_dir, draft_dir))
    for model in (llm, draft):
        model.distribute(accelerator="cpu", precision="32-true")
    run(llm, draft, "loop", prompts[:1], 4, 1)  # the first call is slower: not measured

    variants = [v for v in VARIANTS if v in args.variants]
    records = []
    for repeat in range(args.repeats):
        order = variants[repeat % len(variants) :] + variants[: repeat % len(variants)]
        answers, seconds, batch_rounds, draft_rounds = {}, {}, {}, {}
        for variant in order:
            answers[variant], seconds[variant], rounds, draft_rounds[variant] = run(
                llm, draft, variant, prompts, args.new_tokens, args.prompts
            )
            if variant in ("batch", "batch + lookup"):
                batch_rounds[variant] = rounds
            print(f"repeat {repeat + 1}: {variant}: {seconds[variant]:.1f} s", file=sys.stderr)
        reference = batch_rounds.get("batch", [])
        equivalents = {variant: round_equivalents(rounds, reference) for variant, rounds in batch_rounds.items()}
        round_counts = {variant: len(rounds) for variant, rounds in batch_rounds.items()}
        for variant in variants:
            if answers[variant] != answers[variants[0]]:
                raise SystemExit(f"the answers of {variant!r} differ from those of {variants[0]!r}")
        tokens = sum(len(answer) for answer in answers[variants[0]])
        records.append(
            {
                "seconds": seconds,
                "tokens": tokens,
                "round_equivalents": equivalents,
                "rounds": round_counts,
                "draft_rounds": draft_rounds,
            }
        )

    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    results = {
        "machine": run_machine(args, prompts=args.prompts, kind=args.kind, peak_rss_mib=peak_rss_mib),
        "records": records,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "batch_generate.json").write_text(json.dumps(results, indent=1))
    (args.out / "batch_generate.md").write_text(markdown(results))
    print(markdown(results))
    if {"loop", "batch"} <= set(variants):
        ratio = statistics.median(r["seconds"]["loop"] / r["seconds"]["batch"] for r in records)
        print(f"median batch over loop: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
