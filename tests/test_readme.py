"""The README is current and runs: its generated pair table, and its Python API example on the demo's checkpoints."""

from __future__ import annotations

import re
import subprocess
import sys

import vocabulary_table

from .conftest import ROOT

README = (ROOT / "README.md").read_text()


def test_pair_table_is_what_the_script_generates_from_litgpts_configs():
    block = README.split(vocabulary_table.START, 1)[1].split(vocabulary_table.END, 1)[0]
    assert block.strip() == vocabulary_table.table().strip(), "run: python tools/vocabulary_table.py --write"


def test_python_api_example_runs_as_written(demo_dir):
    section = README.split("## Python API", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.DOTALL)[:1]
    # in a folder laid out as a clone after `python demo/run.py`: build/demo/zen/{draft,target}
    result = subprocess.run([sys.executable, "-c", code], cwd=demo_dir, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "pass silently" in result.stdout
