"""The README and the docs are current and run: their generated tables, the patch table, and the README's Python API
example on the demo's checkpoints."""

from __future__ import annotations

import re
import subprocess
import sys

import upstream_tree
from tools import headline_table, vocabulary_table

from .conftest import ROOT

README = (ROOT / "README.md").read_text()
PAIRS = (ROOT / "docs" / "pairs.md").read_text()
PATCHES = (ROOT / "patches" / "README.md").read_text()


def test_pair_table_is_what_the_script_generates_from_litgpts_configs():
    block = PAIRS.split(vocabulary_table.START, 1)[1].split(vocabulary_table.END, 1)[0]
    assert block.strip() == vocabulary_table.table().strip(), "run: python -m tools.vocabulary_table --write"


def test_headline_table_is_what_the_script_computes_from_the_committed_results():
    block = README.split(headline_table.START, 1)[1].split(headline_table.END, 1)[0]
    assert block.strip() == headline_table.table().strip(), "run: python -m tools.headline_table --write"
    rows = [row.split(" | ") for row in block.strip().splitlines()[2:]]
    assert rows and all(row[2].startswith("`python -m benchmarks.") for row in rows)  # every row names its command


def test_first_screen_reaches_the_first_command():
    first_screen = "\n".join(README.splitlines()[:40])
    assert "pip install torch==2.13.0 . && python -m demo.run" in first_screen


def test_python_api_example_runs_as_written(demo_dir):
    section = README.split("### Python: `LLM.generate`, one prompt or many", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.DOTALL)[:1]
    # in a folder laid out as a clone after `python -m demo.run`: build/demo/zen/{draft,target}
    result = subprocess.run([sys.executable, "-c", code], cwd=demo_dir, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "pass silently" in result.stdout


def test_patch_table_lists_the_series_in_order():
    series = [patch.name for patch in upstream_tree.read_series(ROOT / "patches")]
    linked = re.findall(r"^\| \[(\d{4})\]\(([^)]+)\) \|", PATCHES, re.MULTILINE)
    assert linked == [(name[:4], name) for name in series]
