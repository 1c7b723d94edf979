"""What `litgpt serve --max_batch_size 8` needs for 7B-class models, and what its default KV cache budget admits on a
24 GiB GPU, as README.md and docs/serving.md state it: computed by the server's own rule (`KVMemory`,
`default_kv_cache_memory`, `describe`) on the meta device, without weights.

    python tests/test_kv_budget.py   # prints the table and the README's sentence
"""

from __future__ import annotations

from pathlib import Path

import torch
from litgpt import GPT, Config
from litgpt.generate.kv_memory import KVMemory, default_kv_cache_memory, describe, readable

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("CodeLlama-7b-Instruct-hf", "Mistral-7B-Instruct-v0.3", "Llama-3.1-8B-Instruct")
GPU = 24 * 2**30


def budget(name: str) -> dict[str, str]:
    """What 8 rows of the model's whole context take in bfloat16, and the default budget when the GPU's memory less
    the weights is free."""
    with torch.device("meta"):
        model = GPT(Config.from_name(name)).to(torch.bfloat16)
    context = model.config.block_size
    memory = KVMemory(model, context)
    weights = sum(parameter.numel() for parameter in model.parameters()) * 2
    default = default_kv_cache_memory([memory], 8, context, free=GPU - weights)
    return {
        "name": name,
        "context": f"{context:,}",
        "per_token": readable(memory.token_bytes),
        "eight": readable(memory.bytes(8, context)),
        "weights": readable(weights),
        "default": readable(default),
        "admits": describe(default, [memory], 8, context).split(": ", 1)[1],
    }


def table() -> str:
    lines = [
        "| model, bfloat16 | context | KV per token | 8 requests of the context | weights | default budget |"
        " it admits |",
        "|---|---|---|---|---|---|---|",
    ]
    for b in map(budget, MODELS):
        lines.append(
            f"| {b['name']} | {b['context']} | {b['per_token']} | {b['eight']} | {b['weights']} | {b['default']} |"
            f" {b['admits']} |"
        )
    return "\n".join(lines)


def sentence() -> str:
    b = budget(MODELS[0])
    return (
        f"`--max_batch_size 8` of {b['name']}'s whole context ({b['context']} tokens) needs {b['eight']} of KV cache in"
        f" bfloat16; on a 24 GiB GPU the default budget, {b['default']}, admits {b['admits']}"
    )


def normalized(text: str) -> str:
    return " ".join(text.split())


def test_the_docs_state_what_the_kv_cache_of_7b_models_needs_by_the_servers_rule():
    expected = table()
    assert expected in (ROOT / "docs" / "serving.md").read_text(), f"docs/serving.md should have:\n{expected}"
    assert normalized(sentence()) in normalized((ROOT / "README.md").read_text()), sentence()


if __name__ == "__main__":
    print(table())
    print()
    print(sentence())
