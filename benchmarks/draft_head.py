"""A draft head trained by `litgpt train_draft` against the target alone: tokens/s on open chat prompts that are not in
its training data, one prompt at a time (greedy and sampling) and in batches, with its acceptance and its step's cost.

    python -m benchmarks.draft_head --head build/heads/smollm2 [--target DIR] [--repeats 3] [--threads 2] [--out DIR]
        [--sharegpt 8] [--quick]
    python -m benchmarks.draft_head --lookup [...]

SmolLM2-135M-Instruct (tools/smollm2.py), float32, up to 128 new tokens, the eight chat prompts of tools/smollm2.py
(written by people) and `--sharegpt` first turns of ShareGPT's held-back split (the head trains on texts of its
training split). Cases, interleaved and paired repeat by
repeat (the order of the two variants alternates): each prompt alone through `LLM.generate(prompt)` with and without
`draft_model=LLM.load(head)` (`speculative_k="auto"`, the default with a head), greedy and at temperature 0.7 (then
the tokens/s after the first token, streamed: sampled answers differ in length, and the prefill would weigh more in a
short one's); and
the prompts as a list of 4 and of 8 through `LLM.generate(prompts)` (greedy). Greedy answers must equal the target
alone's. Also: the rounds' accepted tokens per draft position (how often the j-th drafted token was accepted, from the
rounds that drafted at least j), the mean tokens per round that drafted, and the seconds of one step of the head and of
the target (one token per row at position 200, batch 1, 4 and 8, medians of 20), and the head's training (its
`training.json`: tokens, seconds, acceptance on held-back data).

With `--lookup`, the same cases measure prompt lookup instead of a head (`prompt_lookup=True`, `speculative_k="auto"`,
the default with it, and `lookup_cache_tokens=0`: each answer looks up its own prompt and text, not the answers of
earlier repeats): what "auto" makes of the other proposer on open chat prompts, where little is found to propose.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from litgpt import LLM
from litgpt.generate import sequence
from litgpt.generate.draft_head import as_head

from benchmarks.report import run_machine, summary, write_results
from tools import smollm2

ROOT = Path(__file__).resolve().parent.parent

ROUNDS: list[tuple[int, int]] = []  # (proposed, accepted) of each row's round that proposed tokens


def record_rounds(llm: LLM) -> None:
    """Records the proposed and accepted tokens of every round of every row (`DraftCounts.add` of the counts of `llm`,
    not of the rows', which count the same rounds again)."""
    add = sequence.DraftCounts.add

    def recorded(self, proposed: int, accepted: int) -> None:
        if proposed and self is llm.draft_counts:
            ROUNDS.append((proposed, accepted))
        add(self, proposed, accepted)

    sequence.DraftCounts.add = recorded


def generate(llm: LLM, head: LLM | bool | None, prompts: str | list[str], new_tokens: int, temperature: float):
    """The answer(s) and the tokens per second of one call, with `head` drafting (or prompt lookup where it is True).
    Sampling one prompt, of the tokens after the first (the answer streamed): answers sampled with and without the
    head differ in length, and a short one spends more of its time in the prefill, which would weigh in its tokens per
    second."""
    kwargs = dict(max_new_tokens=new_tokens, temperature=temperature)
    if head is True:
        kwargs.update(prompt_lookup=True, lookup_cache_tokens=0)
    elif head is not None:
        kwargs.update(draft_model=head)
    start = time.perf_counter()
    if temperature > 0 and isinstance(prompts, str):
        first, pieces = None, []
        for piece in llm.generate(prompts, stream=True, **kwargs):
            first = first or time.perf_counter()
            pieces.append(piece)
        answers = "".join(pieces)
        tokens = len(llm.preprocessor.encode(answers))
        if tokens > 1:
            return answers, (tokens - 1) / (time.perf_counter() - first)
        return answers, tokens / (time.perf_counter() - start)
    answers = llm.generate(prompts, **kwargs)
    seconds = time.perf_counter() - start
    texts = answers if isinstance(answers, list) else [answers]
    tokens = sum(len(llm.preprocessor.encode(text)) for text in texts)
    return answers, tokens / seconds


@torch.inference_mode()
def step_seconds(llm: LLM, head: LLM, rows: int, position: int = 200, repeats: int = 20) -> dict[str, float]:
    """The median seconds of one forward pass of one token per row, of the target and of the head (its hidden states
    read from a target's pass before it), and of the target's passes over 2 and 3 tokens per row (what verifying 1 and
    2 drafted tokens costs the model)."""
    target, draft = llm.model.module, as_head(head.model)
    for model in (target, draft):
        model.set_kv_cache(batch_size=rows, max_seq_length=position + 8)
    idx = torch.randint(0, target.config.vocab_size, (rows, position + 3))
    passes = {
        "target": (target, 1),
        "head": (draft, 1),
        "target, 2 tokens": (target, 2),
        "target, 3 tokens": (target, 3),
    }
    times = {name: [] for name in passes}
    with draft.attached(target):
        target(idx[:, :position], input_pos=torch.arange(position))
        draft(idx[:, :position], input_pos=torch.arange(position))
        for _ in range(repeats):
            for name, (model, tokens) in passes.items():
                start = time.perf_counter()
                pos = torch.arange(position, position + tokens)
                model(idx[:, position : position + tokens], input_pos=pos, input_pos_maxp1=position + tokens)
                times[name].append(time.perf_counter() - start)
    for model in (target, draft):
        model.clear_kv_cache()
    return {name: statistics.median(values) for name, values in times.items()}


def sharegpt_prompts(llm: LLM, count: int, most_tokens: int = 96) -> list[str]:
    """The first turns of the last `count` conversations of ShareGPT's held-back split (`litgpt.data.ShareGPT`'s, which
    `litgpt train_draft` does not train on: it reads its first texts only, to report its acceptance) of at most
    `most_tokens` tokens: what people asked, in no training data."""
    from litgpt.data import ShareGPT

    data = ShareGPT(num_workers=0)
    data.connect(llm.preprocessor.tokenizer)
    data.setup()
    prompts = []
    for conversation in reversed(data.val_dataset.conversations):
        prompt = conversation[1 if conversation[0]["role"] == "system" else 0]["content"].strip()
        if 8 <= len(llm.preprocessor.encode(prompt)) <= most_tokens and prompt not in prompts:
            prompts.append(prompt)
        if len(prompts) == count:
            break
    return prompts


@torch.inference_mode()
def offline_acceptance(llm: LLM, head: LLM, prompt: str, answer: str, steps: int = 3) -> tuple[list[int], int]:
    """How often the head's most probable token is the target's at each step ahead (the first from the target's hidden
    states, the next from its own outputs), over the answer's positions, as `litgpt train_draft` measures it on its
    held-back texts: the agreements per step and the positions."""
    from litgpt.train_draft import collate, head_loss, target_outputs

    target, draft = llm.model.module, as_head(head.model)
    prompt_ids = llm.preprocessor.encode(llm.prompt_style.apply(prompt)).cpu()
    answer_ids = llm.preprocessor.encode(answer).cpu()
    if llm.preprocessor.tokenizer.use_bos and len(answer_ids) and answer_ids[0] == llm.preprocessor.tokenizer.bos_id:
        answer_ids = answer_ids[1:]
    ids = torch.cat((prompt_ids, answer_ids))
    answer = torch.arange(len(ids)) >= len(prompt_ids)  # the head is measured where the next token is the answer's
    target.clear_kv_cache()
    draft.set_target(target)

    class Fabric:
        device = torch.device("cpu")

    batch = collate(target_outputs(Fabric, target, draft, [(ids, answer)], 1))
    _, agreements = head_loss(draft, batch, steps)
    draft.set_target(None)
    return [int(a.sum()) for a in agreements], int(batch["mask"].sum())


def round_steps(llm: LLM) -> dict[str, dict[int, float]]:
    """Per batch size, the seconds of the rounds of k drafted tokens that the engine timed (for its chooser, the head's
    steps not counted), over those of a step of the target alone: of the k it measured."""
    out = {}
    for draft, chooser in llm._choosers.values():
        if draft is None:  # the target alone's
            continue
        for rows, costs in sorted(chooser.costs.items()):
            if costs.target_seconds and costs.seconds:
                out[str(rows)] = {
                    k: total / count / costs.target_seconds for k, (count, total) in sorted(costs.seconds.items())
                }
    return out


def acceptance_per_position(rounds: list[tuple[int, int]]) -> dict:
    positions = max((k for k, _ in rounds), default=0)
    per_position = []
    for j in range(1, positions + 1):
        drafted = [accepted for k, accepted in rounds if k >= j]
        per_position.append(sum(accepted >= j for accepted in drafted) / len(drafted) if drafted else None)
    tokens_per_round = statistics.mean(1 + accepted for _, accepted in rounds) if rounds else None
    return {"per_position": per_position, "tokens_per_round": tokens_per_round, "rounds": len(rounds)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--head", type=Path, help="the head's directory (litgpt train_draft's out_dir)")
    parser.add_argument("--lookup", action="store_true", help="measure prompt lookup instead of a head")
    parser.add_argument("--target", type=Path, help="the head's target (SmolLM2-135M-Instruct by default)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--sampled-prompts", type=int, default=8, help="the prompts also sampled at temperature 0.7")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu" / "draft_head")
    parser.add_argument("--sharegpt", type=int, default=0, help="held-back ShareGPT prompts, also greedy")
    parser.add_argument("--quick", action="store_true", help="1 prompt, 8 new tokens, one repeat")
    args = parser.parse_args()
    if (args.head is not None) == args.lookup:
        parser.error("give either --head or --lookup")
    torch.set_num_threads(args.threads)
    prompts = list(smollm2.PROMPTS)
    if args.quick:
        prompts, args.new_tokens, args.repeats, args.sampled_prompts = prompts[:1], 8, 1, 1
    checkpoint_dir = args.target or smollm2.make_checkpoint(ROOT / "build" / "smollm2")
    llm = LLM.load(str(checkpoint_dir), distribute=None)
    llm.distribute(accelerator="cpu", precision="32-true")
    head = True
    if not args.lookup:
        head = LLM.load(str(args.head), distribute=None)
        head.distribute(accelerator="cpu", precision="32-true")
    people = sharegpt_prompts(llm, args.sharegpt) if args.sharegpt else []
    record_rounds(llm)
    generate(llm, head, prompts[0], 4, 0.0)  # the first calls are slower: not measured
    generate(llm, None, prompts[0], 4, 0.0)

    cases = [(f"greedy: {p}", p, 0.0) for p in prompts]
    cases += [(f"greedy, ShareGPT: {' '.join(p.split())[:60]}", p, 0.0) for p in people]
    cases += [(f"temperature 0.7: {p}", p, 0.7) for p in prompts[: args.sampled_prompts]]
    cases += [
        (f"batch of {n}", prompts[:n] * (n // len(prompts[:n])), 0.0) for n in (4, 8) if n <= len(prompts) or args.quick
    ]
    ratios: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    speeds: dict[str, dict[str, list[float]]] = {name: {"alone": [], "head": []} for name, _, _ in cases}
    rounds: dict[str, list[tuple[int, int]]] = {"one prompt": [], "batch": []}
    offline: list[tuple[list[int], int]] = []  # per greedy prompt: the head's agreements per step ahead, positions
    for repeat in range(args.repeats):
        for i, (name, prompt, temperature) in enumerate(cases):
            order = ("alone", "head") if (repeat + i) % 2 == 0 else ("head", "alone")
            answers, speed = {}, {}
            for variant in order:
                ROUNDS.clear()
                torch.manual_seed(repeat)
                answers[variant], speed[variant] = generate(
                    llm, head if variant == "head" else None, prompt, args.new_tokens, temperature
                )
                if variant == "head":
                    rounds["batch" if name.startswith("batch") else "one prompt"] += ROUNDS
            if temperature == 0 and answers["head"] != answers["alone"]:
                raise SystemExit(f"{name}: the answer with the head differs from the target's alone")
            if temperature == 0 and repeat == 0 and isinstance(prompt, str) and not args.lookup:
                agreements, positions = offline_acceptance(llm, head, prompt, answers["alone"])
                offline.append((agreements, positions))
            ratios[name].append(speed["head"] / speed["alone"])
            for variant in speed:
                speeds[name][variant].append(speed[variant])
            print(f"repeat {repeat + 1}: {name[:50]}: {speed['head'] / speed['alone']:.2f}x", file=sys.stderr)

    position, repeats = (40, 3) if args.quick else (200, 20)
    steps = {} if args.lookup else {rows: step_seconds(llm, head, rows, position, repeats) for rows in (1, 4, 8)}
    training = None if args.lookup else args.head / "training.json"
    results = {
        "machine": run_machine(args),
        "proposer": "prompt lookup" if args.lookup else "a trained draft head",
        "ratios": ratios,
        "speeds": speeds,
        "acceptance": {kind: acceptance_per_position(r) for kind, r in rounds.items()},
        "offline_acceptance": [sum(a[j] for a, _ in offline) / max(sum(n for _, n in offline), 1) for j in range(3)],
        "step_seconds": {str(rows): s for rows, s in steps.items()},
        "round_steps": round_steps(llm),
        "training": json.loads(training.read_text()) if training and training.is_file() else None,
    }
    write_results(args.out, results, markdown(results))
    return 0


def markdown(results: dict) -> str:
    machine = results["machine"]
    proposer = results.get("proposer", "a trained draft head")
    it = "lookup" if proposer == "prompt lookup" else "the head"
    lines = [
        f"# {proposer.capitalize()} against the target alone ({machine['date']}, {machine['threads']} threads)",
        "",
        f"`{machine['command']}`",
        "",
        f"Sampled at temperature 0.7, the answers with and without {it} differ in length: their tokens/s are"
        " those after the first token (streamed), without the prefill's time.",
        "",
        f"| case | tokens/s with {it} over alone, paired: median (quartiles) | alone, tokens/s |",
        "|---|---|---|",
    ]
    for name, values in results["ratios"].items():
        alone = statistics.median(results["speeds"][name]["alone"])
        lines.append(f"| {name} | {summary(values)} | {alone:.1f} |")
    greedy = [statistics.median(v) for n, v in results["ratios"].items() if n.startswith("greedy")]
    people = [statistics.median(v) for n, v in results["ratios"].items() if n.startswith("greedy, ShareGPT")]
    sampled = [statistics.median(v) for n, v in results["ratios"].items() if n.startswith("temperature")]
    lines += ["", f"One prompt, greedy: median {statistics.median(greedy):.2f}x, lowest {min(greedy):.2f}x."]
    if people:
        lines.append(
            f"Of them, ShareGPT's held-back prompts: median {statistics.median(people):.2f}x,"
            f" lowest {min(people):.2f}x."
        )
    if sampled:
        lines.append(
            f"One prompt, temperature 0.7: median {statistics.median(sampled):.2f}x, lowest {min(sampled):.2f}x."
        )
    for kind, acceptance in results["acceptance"].items():
        per_position = ", ".join("–" if a is None else f"{a:.2f}" for a in acceptance["per_position"])
        tokens = acceptance["tokens_per_round"]
        lines.append(
            f"Acceptance ({kind}): per draft position {per_position}; {tokens or 0:.2f} tokens per round that drafted"
            f" ({acceptance['rounds']} rounds)."
        )
    offline = ", ".join(f"{a:.2f}" for a in results.get("offline_acceptance", []))
    if results["step_seconds"]:  # a head's
        lines.append(
            f"Offline, on the target's greedy answers to the same prompts: the head's most probable token is the"
            f" target's at {offline} of the answers' positions, per step ahead (`litgpt train_draft`'s held-back"
            " measure)."
        )
    costs = "; ".join(
        f"{rows} row(s): target {s['target'] * 1e3:.1f} ms, head {s['head'] * 1e3:.1f} ms"
        f" ({s['head'] / s['target']:.2f}), target over 2 and 3 tokens per row"
        f" {s['target, 2 tokens'] / s['target']:.2f} and {s['target, 3 tokens'] / s['target']:.2f} steps"
        for rows, s in results["step_seconds"].items()
    )
    if costs:
        lines.append(f"One step (one token per row): {costs}.")
    rounds = "; ".join(
        f"{rows} row(s): " + ", ".join(f"k={k} {steps:.2f}" for k, steps in per_k.items())
        for rows, per_k in results.get("round_steps", {}).items()
    )
    if rounds:
        lines.append(
            f"A round with k drafted tokens, in steps of the target alone, as the engine timed them (the head's steps"
            f" not counted): {rounds}."
        )
    if results["training"]:
        t = results["training"]
        lines.append(
            f"Training: {t['tokens']:,} tokens in {t['seconds'] / 60:.1f} min ({t['steps']} steps), the data made in"
            f" {t['data_seconds'] / 60:.1f} min; held-back acceptance per step ahead {t['acceptance']}."
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
