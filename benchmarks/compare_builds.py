"""Two builds of the fork, side by side in one process: the cost of speculative decoding's loop, interleaved and paired.

    python -m benchmarks.compare_builds OLD NEW [--repeats 10] [--out DIR]

OLD and NEW are folders that hold a `litgpt` package (a copy of an installed build's `site-packages/litgpt`, or
`build/upstream` for the tree being edited). Each is loaded under a name of its own (its imports of `litgpt` renamed),
so that both run in one process, alternating which goes first, and each ratio NEW / OLD is taken between two runs
that follow each other. A refactor of the loop should leave them at 1, since the decisions are the same
(tools/replay_rounds.py checks that); what is left is the loop's own cost.

- The loop alone: milliseconds per round with models that cost nothing (fixed logits over 64 tokens), 256 new tokens:
  k = 1..8 sampled at temperature 1; `speculative_k="auto"` with a draft whose greedy token is never the target's (it
  cannot pay: auto soon decodes with the target alone); prompt lookup alone, greedy (long proposals, all accepted).
- A real loop: greedy time per token on a pythia-160m-shaped target of 8 layers with a 4096-token vocabulary (random
  weights, 25-40 tokens/s on this machine's CPU, 1 thread): the target alone (`litgpt.generate.base`), k = 4 with a
  draft that is the target's first layer (alpha = 1, pairs.py), "auto" with an unrelated 1-layer draft (alpha ~ 0),
  and prompt lookup alone on a prompt that repeats itself; and for each build, "auto" with that draft over the target
  alone (what a draft that cannot pay costs).
- With `--api`, instead: `LLM.generate(prompt)` of SmolLM2-135M-Instruct (tools/smollm2.py, float32, greedy, up to
  128 new tokens) on the tasks of benchmarks/prompt_lookup_tasks.json, alone, with `prompt_lookup=True` (in the prompt
  and the answer), with its first 4 blocks as `draft_model` (which cannot pay; `speculative_k="auto"`) and with both:
  seconds per call, new / old paired per prompt and repeat, and whether both builds answer every prompt alike.
- With `--chat`, instead: `litgpt chat` of SmolLM2-135M-Instruct, each build's as a subprocess with its folder on
  PYTHONPATH, the tasks' prompts as the turns of one chat (greedy, up to 64 new tokens): alone, with `--prompt_lookup`
  and with the 4-block draft (`--speculative_k auto`); the seconds of each turn as chat prints them, new / old paired
  per turn and repeat, and whether both builds reply alike.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks import timing
from benchmarks.report import command_line

ROOT = Path(__file__).resolve().parent.parent


def load_build(folder: Path, name: str, into: Path):
    """The `litgpt` package in `folder`, copied to `into/name` with its imports renamed, and imported as `name`."""
    shutil.copytree(folder / "litgpt", into / name, ignore=shutil.ignore_patterns("__pycache__"))
    for path in (into / name).rglob("*.py"):
        source = path.read_text()
        renamed = re.sub(r"^(\s*)(from|import) litgpt\b", rf"\1\2 {name}", source, flags=re.MULTILINE)
        renamed = re.sub(r"\blitgpt\.", f"{name}.", renamed)
        path.write_text(renamed)
    if str(into) not in sys.path:
        sys.path.insert(0, str(into))
    return importlib.import_module(f"{name}.generate.speculative_decoding"), importlib.import_module(
        f"{name}.generate.base"
    )


def quartiles(values: list[float]) -> str:
    q1, median, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else (values[0],) * 3
    return f"**{median:.3f}** ({q1:.3f}-{q3:.3f})"


@torch.inference_mode()
def loop_rows(builds: dict, repeats: int, new_tokens: int = 256) -> list[dict]:
    torch.manual_seed(0)
    logits = torch.randn(64)
    other = logits.clone()
    other[logits.argmax()] = logits.min() - 1  # never the target's greedy token
    draft, sampled, greedy = timing.FixedLogits(logits), timing.FixedLogits(logits.roll(1)), timing.FixedLogits(logits)
    prompt = torch.tensor([1, 2, 3])
    cases = {f"k={k}": (draft, sampled, 1.0, k, False) for k in range(1, 9)}
    cases["auto, no gain"] = (timing.FixedLogits(other), greedy, 0.0, "auto", False)
    cases["lookup"] = (None, greedy, 0.0, "auto", True)
    rows = []
    for case, (drafter, target, temperature, k, lookup) in cases.items():
        ms = {name: [] for name in builds}
        for repeat in range(repeats):
            for name in list(builds)[:: 1 if repeat % 2 == 0 else -1]:
                torch.manual_seed(repeat)
                target.calls = 0
                start = time.perf_counter()
                builds[name][0].generate(
                    drafter, target, prompt, prompt.size(0) + new_tokens, temperature=temperature, speculative_k=k,
                    prompt_lookup=lookup,
                )  # fmt: skip
                ms[name].append(1000 * (time.perf_counter() - start) / max(target.calls - 1, 1))
        ratios = [new / old for old, new in zip(ms["old"], ms["new"])]
        rows.append({"case": case, "ms_per_round": ms, "new_over_old": ratios})
    return rows


@torch.inference_mode()
def model_rows(builds: dict, repeats: int, new_tokens: int = 128) -> list[dict]:
    from benchmarks import pairs

    config = pairs.target_config("pythia-160m", block_size=512, n_layer=8, vocab=4096)
    draft, target = pairs.controlled_pair(config, torch.device("cpu"), torch.float32)
    torch.manual_seed(123)
    unrelated = type(target)(dataclasses.replace(config, n_layer=1)).eval()
    prompt = torch.randint(0, 4096, (16,))
    repeating = torch.cat([prompt] * 4)

    def run(name: str, case: str) -> float:
        sd, base = builds[name]
        models = {"alone": (target,), "k=4": (draft, target), "auto, no gain": (unrelated, target)}.get(case, (target,))
        timing.fresh_cache(*models, max_seq_length=512)
        start = time.perf_counter()
        if case == "alone":
            base.generate(target, prompt, prompt.size(0) + new_tokens, temperature=0.0)
        elif case == "lookup":
            sd.generate(
                None, target, repeating, repeating.size(0) + new_tokens, temperature=0.0, speculative_k="auto",
                prompt_lookup=True,
            )  # fmt: skip
        else:
            k = 4 if case == "k=4" else "auto"
            sd.generate(models[0], target, prompt, prompt.size(0) + new_tokens, temperature=0.0, speculative_k=k)
        return (time.perf_counter() - start) / new_tokens

    cases = ["alone", "k=4", "auto, no gain", "lookup"]
    for name in builds:  # warm-up
        for case in cases:
            run(name, case)
    seconds = {name: {case: [] for case in cases} for name in builds}
    for repeat in range(repeats):
        for name in list(builds)[:: 1 if repeat % 2 == 0 else -1]:
            for case in cases:
                seconds[name][case].append(run(name, case))
        print(f"model repeat {repeat + 1}/{repeats}", file=sys.stderr, flush=True)
    rows = []
    for case in cases:
        ratios = [new / old for old, new in zip(seconds["old"][case], seconds["new"][case])]
        over_alone = {
            name: [alone / t for alone, t in zip(seconds[name]["alone"], seconds[name][case])] for name in builds
        }
        rows.append({"case": case, "seconds_per_token": {n: seconds[n][case] for n in builds}, "new_over_old": ratios,
                     "speed_over_alone": over_alone})  # fmt: skip
    return rows


# prompt lookup in the prompt and the answer only (`lookup_cache_tokens=0`): an answer to a prompt asked before would be
# looked up whole; the draft with `speculative_k="auto"`
API_CASES = {
    "alone": {},
    "lookup": {"prompt_lookup": True, "lookup_cache_tokens": 0},
    "draft": {"draft_model": True, "speculative_k": "auto"},
    "lookup + draft": {"prompt_lookup": True, "lookup_cache_tokens": 0, "draft_model": True},
}


def paired(seconds: dict[str, dict[str, list[float]]]) -> list[dict]:
    """Per case, the seconds of each build (`seconds[build][case]`) and new / old, run by run."""
    return [
        {
            "case": case,
            "seconds": {name: seconds[name][case] for name in seconds},
            "new_over_old": [new / old for old, new in zip(seconds["old"][case], seconds["new"][case])],
        }
        for case in seconds["old"]
    ]


def api_rows(builds: dict, repeats: int, new_tokens: int = 128) -> tuple[list[dict], int]:
    """Seconds of `LLM.generate` per case, prompt and build; and how many answers differ between the builds."""
    from tools import layer_draft, smollm2

    checkpoint_dir = smollm2.make_checkpoint(ROOT / "build" / "smollm2")
    draft_dir = layer_draft.make_draft(checkpoint_dir, 4)
    llms = {}
    for name in builds:
        llm_class = importlib.import_module(f"build_{name}.api").LLM
        llms[name] = [llm_class.load(str(path), distribute=None) for path in (checkpoint_dir, draft_dir)]
        for llm in llms[name]:
            llm.distribute(accelerator="cpu", precision="32-true")
    prompts = [
        task["prompt"] for task in json.loads((ROOT / "benchmarks" / "prompt_lookup_tasks.json").read_text())["tasks"]
    ]

    def run(name: str, case: str, prompt: str) -> tuple[float, str]:
        llm, draft = llms[name]
        kwargs = {**API_CASES[case], "draft_model": draft} if "draft_model" in API_CASES[case] else API_CASES[case]
        start = time.perf_counter()
        text = llm.generate(prompt, temperature=0.0, max_new_tokens=new_tokens, **kwargs)
        return time.perf_counter() - start, text

    for name in builds:  # warm-up
        run(name, "alone", prompts[0])
    seconds = {name: {case: [] for case in API_CASES} for name in builds}
    differ = 0
    for repeat in range(repeats):
        for i, prompt in enumerate(prompts):
            for case in API_CASES:
                texts = {}
                for name in list(builds)[:: 1 if (repeat + i) % 2 == 0 else -1]:
                    elapsed, texts[name] = run(name, case, prompt)
                    seconds[name][case].append(elapsed)
                differ += texts["old"] != texts["new"]
        print(f"api repeat {repeat + 1}/{repeats}", file=sys.stderr, flush=True)
    return paired(seconds), differ


CHAT_CASES = {"alone": [], "lookup": ["--prompt_lookup", "true"], "draft": ["--speculative_k", "auto"]}


def chat_rows(folders: dict[str, Path], repeats: int, threads: int, new_tokens: int = 64) -> tuple[list[dict], int]:
    """Seconds of each turn of `litgpt chat` per case and build; and how many replies differ between the builds."""
    from tools import greedy_answers, layer_draft, smollm2

    checkpoint_dir = smollm2.make_checkpoint(ROOT / "build" / "smollm2")
    draft_dir = layer_draft.make_draft(checkpoint_dir, 4)
    prompts = [
        task["prompt"] for task in json.loads((ROOT / "benchmarks" / "prompt_lookup_tasks.json").read_text())["tasks"]
    ]

    def run(name: str, case: str) -> tuple[list[float], list[str]]:
        options = [*CHAT_CASES[case], *(["--draft_model", str(draft_dir)] if case == "draft" else [])]
        env = {**os.environ, "PYTHONPATH": str(folders[name].resolve()), "OMP_NUM_THREADS": str(threads)}
        replies, seconds = greedy_answers.chat_replies(checkpoint_dir, prompts, options, new_tokens, env)
        return seconds, replies

    seconds = {name: {case: [] for case in CHAT_CASES} for name in folders}
    differ = 0
    for repeat in range(repeats):
        for i, case in enumerate(CHAT_CASES):
            replies = {}
            for name in list(folders)[:: 1 if (repeat + i) % 2 == 0 else -1]:
                turn_seconds, replies[name] = run(name, case)
                seconds[name][case] += turn_seconds
            differ += sum(old != new for old, new in zip(replies["old"], replies["new"]))
        print(f"chat repeat {repeat + 1}/{repeats}", file=sys.stderr, flush=True)
    return paired(seconds), differ


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, help="write compare_builds.json and compare_builds.md there")
    parser.add_argument("--api", action="store_true", help="LLM.generate on SmolLM2 instead of the loop")
    parser.add_argument("--chat", action="store_true", help="litgpt chat on SmolLM2 instead of the loop")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.chat:
        rows, differ = chat_rows({"old": args.old, "new": args.new}, args.repeats, args.threads)
        return api_report(
            args, rows, differ, "`litgpt chat` of SmolLM2-135M-Instruct, greedy, up to 64 new tokens, per turn"
        )
    with tempfile.TemporaryDirectory() as tmp:
        builds = {name: load_build(folder.resolve(), f"build_{name}", Path(tmp)) for name, folder in
                  (("old", args.old), ("new", args.new))}  # fmt: skip
        if args.api:
            return api_report(args, *api_rows(builds, repeats=args.repeats))
        loop = loop_rows(builds, repeats=5 * args.repeats)
        model = model_rows(builds, repeats=args.repeats)

    lines = [f"`{' '.join(['python', *sys.argv])}`", "", "The loop alone (models that cost nothing):", ""]
    lines += ["| case | ms per round, old | ms per round, new | new / old (median, quartiles) |", "|---|---|---|---|"]
    for row in loop:
        old, new = (statistics.median(row["ms_per_round"][n]) for n in ("old", "new"))
        lines.append(f"| {row['case']} | {old:.3f} | {new:.3f} | {quartiles(row['new_over_old'])} |")
    lines += ["", "A real loop (8 x 768 target, 1 thread, greedy, 128 new tokens):", "",
              "| case | time per token new / old (median, quartiles) | speed over the target alone, old | new |",
              "|---|---|---|---|"]  # fmt: skip
    for row in model:
        speeds = {n: quartiles(row["speed_over_alone"][n]) for n in ("old", "new")}
        lines.append(f"| {row['case']} | {quartiles(row['new_over_old'])} | {speeds['old']} | {speeds['new']} |")
    print("\n".join(lines))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        result = {"command": sys.argv, "threads": args.threads, "loop": loop, "model": model}
        (args.out / "compare_builds.json").write_text(json.dumps(result) + "\n")
        (args.out / "compare_builds.md").write_text("\n".join(lines) + "\n")
    return 0


def api_report(
    args: argparse.Namespace,
    rows: list[dict],
    differ: int,
    what: str = "`LLM.generate(prompt)` of SmolLM2-135M-Instruct, greedy, up to 128 new tokens, per prompt",
) -> int:
    name = "compare_builds_chat" if args.chat else "compare_builds_api"
    lines = [
        f"`{command_line()}`, {args.threads} thread(s)",
        "",
        f"{what} and repeat:",
        "",
        "| case | seconds per call, old | new | new / old (median, quartiles) |",
        "|---|---|---|---|",
    ]
    for row in rows:
        old, new = (statistics.median(row["seconds"][n]) for n in ("old", "new"))
        lines.append(f"| {row['case']} | {old:.2f} | {new:.2f} | {quartiles(row['new_over_old'])} |")
    lines += ["", f"Answers that differ between the builds: {differ} of {len(rows) * len(rows[0]['new_over_old'])}"]
    print("\n".join(lines))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        result = {"command": command_line(), "threads": args.threads, "api": rows, "differ": differ}
        (args.out / f"{name}.json").write_text(json.dumps(result) + "\n")
        (args.out / f"{name}.md").write_text("\n".join(lines) + "\n")
    return 0 if differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
