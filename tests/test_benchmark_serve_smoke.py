"""The benchmarks that start `litgpt serve` run end to end on a tiny configuration and write their tables and data
(a module of their own, so that a test worker runs them beside the in-process benchmarks' smoke tests)."""

from __future__ import annotations

import json

from benchmarks import lookup_workload, serve

from .test_benchmark_smoke import run


def test_serve_benchmark_quick_writes_table_and_json(tmp_path, monkeypatch):
    run(monkeypatch, serve, "--quick", "--out", str(tmp_path))
    results = json.loads((tmp_path / "serve.json").read_text())
    served = [r for r in results["records"] if r["server"] in ("alone", "lookup")]
    api = [r for r in results["records"] if r["server"] in ("api alone", "api lookup")]
    # one task of each kind, at 1 and at 4 clients (4 requests at once), on both servers; at 1 client through the API
    assert len(served) == 2 * (1 + 4) * 2 and len(api) == 2 * 2
    assert {(r["clients"], r["server"]) for r in served} == {(c, s) for c in (1, 4) for s in ("alone", "lookup")}
    alone = {r["task"]: r["text"] for r in served if r["server"] == "alone"}
    assert all(r["text"] == alone[r["task"]] and r["tokens"] == 12 and 0 < r["ttft_s"] < r["latency_s"] for r in served)
    assert all(r["tokens_per_s"] > 0 for r in served) and all(r["latency_s"] > 0 for r in api)
    md = (tmp_path / "serve.md").read_text()
    assert "## 4 clients" in md and "Answers equal to the alone server's: 20 of 20." in md
    assert "litgpt:spec_decode_num_drafts_total" in md and "At 4 clients, per batch of 4 requests" in md

    (tmp_path / "serve.md").unlink()
    run(monkeypatch, serve, "--report", "--out", str(tmp_path))
    assert (tmp_path / "serve.md").read_text() == md


def test_serve_benchmark_compares_batching(tmp_path, monkeypatch):
    run(
        monkeypatch,
        serve,
        "--compare",
        "batching",
        "--max-batch-size",
        "2",
        "--quick",
        "--clients",
        "1",
        "2",
        "--out",
        str(tmp_path),
    )
    results = json.loads((tmp_path / "serve.json").read_text())
    servers = ("one at a time", "batched")
    # one task of each kind, at 1 and at 2 clients, on both servers; no API runs
    assert len(results["records"]) == 2 * (1 + 2) * 2
    assert {(r["clients"], r["server"]) for r in results["records"]} == {(c, s) for c in (1, 2) for s in servers}
    md = (tmp_path / "serve.md").read_text()
    assert "# Serving with continuous batching" in md and "Answers equal to the one at a time server's: 12 of 12." in md
    assert "the batched server's median time to first token at 2 clients over at 1 client" in md
    assert "litgpt:num_requests_running" in md


def test_serve_benchmark_compares_a_draft_beside_lookup(tmp_path, monkeypatch):
    run(
        monkeypatch,
        serve,
        "--compare",
        "draft",
        "--max-batch-size",
        "2",
        "--quick",
        "--clients",
        "1",
        "--out",
        str(tmp_path),
    )
    results = json.loads((tmp_path / "serve.json").read_text())
    assert {r["server"] for r in results["records"]} == {"lookup", "lookup + draft"}
    md = (tmp_path / "serve.md").read_text()
    assert (
        "# Serving with prompt lookup and a draft model" in md and "Answers equal to the lookup server's: 4 of 4." in md
    )
    assert "spec_decode_num_draft_tokens_total" in md


def test_lookup_workload_benchmark_through_the_server_quick(tmp_path, monkeypatch):
    run(monkeypatch, lookup_workload, "--quick", "--server", "--out", str(tmp_path))
    results = json.loads((tmp_path / "lookup_workload_serve.json").read_text())
    records = results["records"]
    assert [(r["workload"], r["index"]) for r in records[::3]] == [
        ("JSON records", 0),
        ("JSON records", 1),
        ("unrelated requests", 0),
        ("unrelated requests", 1),
    ]
    assert all(0 < r["completion_tokens"] <= 12 and r["seconds"] > 0 and r["text"] for r in records)
    # the servers with lookup verified proposals (counted in their /metrics), the one without none
    assert all(r["rounds"] == 0 for r in records if r["variant"] == "alone")
    assert any(r["rounds"] > 0 for r in records if r["variant"] != "alone")
    md = (tmp_path / "lookup_workload_serve.md").read_text()
    assert "litgpt serve" in md and "## unrelated requests" in md and "| **no** |" not in md

    (tmp_path / "lookup_workload_serve.md").unlink()
    run(monkeypatch, lookup_workload, "--server", "--report", "--out", str(tmp_path))
    assert (tmp_path / "lookup_workload_serve.md").read_text() == md
