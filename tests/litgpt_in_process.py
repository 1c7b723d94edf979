"""Run `litgpt` commands in the test's process, as the console script runs them: `litgpt.__main__.main` on an argv.

The same argument parsing and code as `demo/cli.py`'s subprocesses (with its `Run` and its parsing of the output),
without the seconds a new interpreter takes to import torch and litgpt, which a test module that runs dozens of
commands pays dozens of times. The console script itself runs in test_installed_fork.py, test_demo.py, the tests
that count compiled graphs and every test that starts a server.
"""

from __future__ import annotations

import contextlib
import io
import sys
import traceback
from pathlib import Path
from unittest import mock

import pytest
import torch

from demo import cli


def litgpt(*args: str, stdin: str = "") -> tuple[str, str]:
    """Runs `litgpt *args` with `stdin` as its input; returns its stdout and stderr, or raises with them and the
    traceback (so a refusal reads as the console script prints it) if it fails."""
    from litgpt.__main__ import main

    args = tuple(map(str, args))
    out, err = io.StringIO(), io.StringIO()
    precision = torch.get_float32_matmul_precision()  # main() sets it for the whole process
    with (
        mock.patch.object(sys, "argv", ["litgpt", *args]),
        mock.patch.object(sys, "stdin", io.StringIO(stdin)),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            main()
        except SystemExit as exit:  # the argument parser's refusals
            if exit.code:
                raise RuntimeError(f"litgpt {' '.join(args)} exited {exit.code}:\n{err.getvalue()[-3000:]}") from None
        except Exception:
            trace = traceback.format_exc()
            raise RuntimeError(f"litgpt {' '.join(args)} failed:\n{err.getvalue()[-3000:]}\n{trace}") from None
        finally:
            torch.set_float32_matmul_precision(precision)
    return out.getvalue(), err.getvalue()


def generate(target: Path, prompt: str, *options: str) -> cli.Run:
    return cli.parse(*litgpt("generate", target, "--prompt", prompt, *options), prompt=prompt)


def generate_speculatively(draft: Path, target: Path, prompt: str, *options: str) -> cli.Run:
    return cli.parse(*litgpt("generate_speculatively", draft, target, "--prompt", prompt, *options), prompt=prompt)


def chat(checkpoint: Path, turns: list[str], *options: str) -> tuple[list[str], str]:
    """`litgpt chat`'s replies to `turns` (typed at its prompt, then an empty line), and its stderr."""
    stdout, stderr = litgpt("chat", checkpoint, *options, stdin="".join(f"{turn}\n" for turn in turns) + "\n")
    return cli.replies(stdout), stderr


def refused_at_start(*args: str) -> str:
    """Runs `litgpt serve *args`, checks that it fails before its server would listen (LitServer.run), and returns
    what it printed and raised."""
    import litserve

    started = AssertionError("litgpt serve got as far as starting its server")
    with mock.patch.object(litserve.LitServer, "run", side_effect=started), pytest.raises(RuntimeError) as error:
        litgpt("serve", *args)
    assert "got as far as starting its server" not in str(error.value), str(error.value)[-2000:]
    return str(error.value)
