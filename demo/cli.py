"""Run ``litgpt generate`` and ``litgpt generate_speculatively`` as a user would, and read back the completion."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Run:
    text: str  # the decoded output, prompt included, as the CLI prints it
    acceptance_rate: float | None  # printed by generate_speculatively only
    tokens_per_sec: float
    stdout: str
    stderr: str


def litgpt(*args: str) -> Run:
    """Run the installed ``litgpt`` console script; raise with its output if it fails."""
    exe = shutil.which("litgpt")
    if exe is None:
        raise FileNotFoundError("the `litgpt` command is not on PATH: install the fork with `pip install .`")
    result = subprocess.run([exe, *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"litgpt {' '.join(args)} exited {result.returncode}:\n{result.stderr[-3000:]}")
    return parse(result.stdout, result.stderr, prompt=args[args.index("--prompt") + 1])


def parse(stdout: str, stderr: str, prompt: str) -> Run:
    # stdout is pprint(locals()), then the decoded output (which starts with the prompt), then the acceptance rate
    start = re.search("^" + re.escape(prompt), stdout, re.MULTILINE)
    if start is None:
        raise ValueError(f"no output starting with the prompt {prompt!r} in:\n{stdout}")
    text, _, rest = stdout[start.start() :].partition("\nAcceptance rate: ")
    rate = re.match(r"([\d.]+)%", rest)
    speed = re.findall(r"([\d.]+) tokens/sec", stderr)
    return Run(
        text=text.rstrip("\n"),
        acceptance_rate=float(rate.group(1)) / 100 if rate else None,
        tokens_per_sec=float(speed[-1]) if speed else float("nan"),
        stdout=stdout,
        stderr=stderr,
    )


def generate(target: Path, prompt: str, *options: str) -> Run:
    return litgpt("generate", str(target), "--prompt", prompt, *options)


def generate_speculatively(draft: Path, target: Path, prompt: str, *options: str) -> Run:
    return litgpt("generate_speculatively", str(draft), str(target), "--prompt", prompt, *options)


def chat(checkpoint: Path, turns: list[str], *options: str) -> tuple[list[str], str]:
    """Run ``litgpt chat``, typing ``turns`` at its prompt and then an empty line; return its replies and stderr."""
    result = subprocess.run(
        [shutil.which("litgpt") or "litgpt", "chat", str(checkpoint), *options],
        input="".join(f"{turn}\n" for turn in turns) + "\n",
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"litgpt chat exited {result.returncode}:\n{result.stderr[-3000:]}")
    return replies(result.stdout), result.stderr


def replies(stdout: str) -> list[str]:
    """The replies in what ``litgpt chat`` printed: each after ">> Reply: ", ending with a newline before the next
    ">> Prompt: "."""
    return re.findall(r">> Reply: (.*?)\n(?=>> Prompt: )", stdout, re.DOTALL)
