"""Write every entry point's greedy answers to a JSON file, to compare two builds byte for byte.

    python -m tools.greedy_answers --out before.json               # with one build installed (or PYTHONPATH=...)
    python -m tools.greedy_answers --out after.json                # with the other; then: cmp before.json after.json

On the demo's Zen pair and on SmolLM2-135M-Instruct with its 4-block draft (float32, CPU, temperature 0), each prompt
through `LLM.generate` alone, with prompt lookup, with the draft model and with both: as text, as token ids, as a
stream (its pieces joined) and in a list of prompts; through `litgpt chat` (the prompts as the turns of one chat);
then through `litgpt serve --openai_spec true` at `--max_batch_size 1` and 4, streamed and not, with the same four ways
of decoding.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from demo import zen
from harness import litgpt_server
from tools import layer_draft, smollm2

ROOT = Path(__file__).resolve().parent.parent


MAX_NEW_TOKENS = 40
MODES = {
    "alone": {},
    "lookup": {"prompt_lookup": True},
    "draft": {"draft": True},
    "both": {"prompt_lookup": True, "draft": True},
}


def pairs() -> dict[str, tuple[Path, Path, list[str]]]:
    draft_dir, target_dir = zen.build_zen_pair(ROOT / "build" / "demo")
    zen_lines = zen.zen_of_python().splitlines()
    smollm2_dir = smollm2.make_checkpoint(ROOT / "build" / "smollm2")
    copy = "Repeat this list exactly:\n- apple: red, sweet\n- lemon: yellow, sour\n- lime: green, sour"
    return {
        "zen": (target_dir, draft_dir, ["Beautiful is better than", "Errors should never", "\n".join(zen_lines[2:6])]),
        "smollm2": (smollm2_dir, layer_draft.make_draft(smollm2_dir, 4), [*smollm2.PROMPTS[:3], copy]),
    }


def api_answers(target_dir: Path, draft_dir: Path, prompts: list[str]) -> dict:
    from litgpt import LLM

    llm, draft = (LLM.load(str(path), distribute=None) for path in (target_dir, draft_dir))
    for model in (llm, draft):
        model.distribute(accelerator="cpu", precision="32-true")
    answers = {}
    for mode, options in MODES.items():
        kwargs = dict(temperature=0, max_new_tokens=MAX_NEW_TOKENS, prompt_lookup=options.get("prompt_lookup", False))
        if options.get("draft"):
            kwargs["draft_model"] = draft
        answers[mode] = {
            "text": [llm.generate(prompt, **kwargs) for prompt in prompts],
            "ids": [llm.generate(prompt, return_as_token_ids=True, **kwargs).tolist() for prompt in prompts],
            "stream": ["".join(llm.generate(prompt, stream=True, **kwargs)) for prompt in prompts],
            "list": llm.generate(prompts, max_batch_size=3, **kwargs),
        }
    return answers


def chat_replies(
    checkpoint_dir: Path, prompts: list[str], options: list[str], max_new_tokens: int, env: dict | None = None
) -> tuple[list[str], list[float]]:
    """The replies of one greedy, float32 `litgpt chat` session with `options` to `prompts`, turn by turn, and the
    seconds of each turn as chat prints them (`env`: the environment to run it in, if not this one's)."""
    command = [sys.executable, "-m", "litgpt", "chat", str(checkpoint_dir), "--multiline", "true", "--temperature", "0"]
    command += ["--max_new_tokens", str(max_new_tokens), "--precision", "32-true", *options]
    turns = "".join(f"{prompt}\n!submit\n" for prompt in prompts) + "!quit\n"
    done = subprocess.run(command, input=turns, capture_output=True, text=True, check=True, env=env)
    seconds = [float(s) for s in re.findall(r"Time for inference: ([\d.]+) sec total", done.stderr)]
    # each reply up to the next prompt (not what a build prints to stdout after it)
    return [reply.split("\n>> Prompt:")[0].rstrip("\n") for reply in done.stdout.split(">> Reply: ")[1:]], seconds


def chat_answers(target_dir: Path, draft_dir: Path, prompts: list[str]) -> dict:
    answers = {}
    for mode, options in MODES.items():
        extra = ["--prompt_lookup", "true"] if options.get("prompt_lookup") else []
        extra += ["--draft_model", str(draft_dir)] if options.get("draft") else []
        answers[mode] = chat_replies(target_dir, prompts, extra, MAX_NEW_TOKENS)[0]
    return answers


def served_answers(target_dir: Path, draft_dir: Path, prompts: list[str], log_dir: Path) -> dict:
    import openai

    options = ["--openai_spec", "true", "--accelerator", "cpu", "--precision", "32-true", "--timeout", "600"]
    options += ["--max_new_tokens", str(MAX_NEW_TOKENS), "--max_seq_length", "512"]
    answers = {}
    for batch in (1, 4):
        configurations = {}
        for mode, mode_options in MODES.items():
            extra = ["--max_batch_size", str(batch)]
            if mode_options.get("prompt_lookup"):
                extra += ["--prompt_lookup", "true"]
            if mode_options.get("draft"):
                extra += ["--draft_model", str(draft_dir)]
            configurations[mode] = [*options, *extra]
        with litgpt_server.serving(*((target_dir, o) for o in configurations.values()), log_dir=log_dir) as servers:
            for mode, server in zip(configurations, servers):
                client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="none", max_retries=0, timeout=600)

                def ask(prompt: str, stream: bool) -> str:
                    messages = [{"role": "user", "content": prompt}]
                    reply = client.chat.completions.create(model="m", messages=messages, temperature=0, stream=stream)
                    if not stream:
                        return reply.choices[0].message.content
                    return "".join(c.choices[0].delta.content or "" for c in reply if c.choices)

                with ThreadPoolExecutor(len(prompts)) as pool:  # concurrent clients, as a batch takes them
                    answers[f"batch {batch} {mode}"] = {
                        "text": list(pool.map(lambda p: ask(p, False), prompts)),
                        "stream": list(pool.map(lambda p: ask(p, True), prompts)),
                    }
    return answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--no-serve", action="store_true", help="only the Python API")
    args = parser.parse_args()
    log_dir = args.out.with_suffix(".logs")
    log_dir.mkdir(parents=True, exist_ok=True)
    result = {}
    for name, (target_dir, draft_dir, prompts) in pairs().items():
        result[name] = {
            "api": api_answers(target_dir, draft_dir, prompts),
            "chat": chat_answers(target_dir, draft_dir, prompts),
        }
        if not args.no_serve:
            result[name]["serve"] = served_answers(target_dir, draft_dir, prompts, log_dir)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
