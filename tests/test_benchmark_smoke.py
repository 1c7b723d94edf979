"""The benchmark runs end to end on a tiny configuration and writes its table, data and plot."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import ROOT


def test_benchmark_quick_writes_table_json_and_plot(tmp_path):
    cmd = [sys.executable, str(ROOT / "benchmarks" / "speculative_speed.py"), "--quick", "--out", str(tmp_path)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    results = json.loads((tmp_path / "results.json").read_text())
    assert [pair["noise"] for pair in results["pairs"]] == [0.0, 0.05]
    assert results["pairs"][0]["alpha"] == 1.0  # the zeroed-projection construction: draft == target
    for pair in results["pairs"]:
        assert [row["k"] for row in pair["rows"]] == [1, 2]
        for row in pair["rows"]:
            assert row["bound"] > 0 and row["fork"]["tokens_per_s"] > 0
            assert row["0.5.13 sampled"]["tokens_per_s"] > 0 and row["transformers"]["tokens_per_s"] > 0
    assert [row["k"] for row in results["loop_overhead"]] == [1, 2]
    assert all(row["fork"] > 0 and row["0.5.13"] > 0 for row in results["loop_overhead"])
    assert "| k | v(k+1) | bound |" in (tmp_path / "results.md").read_text()
    assert (tmp_path / "speedup.png").read_bytes().startswith(b"\x89PNG")
