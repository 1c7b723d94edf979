"""A draft model cut from a LitGPT checkpoint: its first N blocks, with its embeddings, final norm and head.

    python -m tools.layer_draft CHECKPOINT_DIR --layers 4 [--out DIR]   # default: CHECKPOINT_DIR-first4 beside it

Such a draft shares the target's tokenizer and vocabulary by construction, costs about N / n_layer of a target
step, and agrees with the target on few tokens (SmolLM2-135M-Instruct: 1-19% accepted at k = 4 for N = 4..20): what
a test of the rejection path on real distributions wants, not a draft that pays.
"""

from __future__ import annotations

import argparse
import shutil
from dataclasses import asdict
from pathlib import Path

import torch
import yaml
from litgpt import Config


def make_draft(checkpoint_dir: Path, layers: int, out: Path | None = None) -> Path:
    """Write the draft to ``out`` (cached: an existing draft is reused) and return its folder."""
    config = Config.from_file(checkpoint_dir / "model_config.yaml")
    if not 1 <= layers <= config.n_layer:
        raise ValueError(f"layers must be between 1 and the checkpoint's n_layer ({config.n_layer}), got {layers}")
    out = out or checkpoint_dir.with_name(f"{checkpoint_dir.name}-first{layers}")
    if (out / "lit_model.pth").is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    state = torch.load(checkpoint_dir / "lit_model.pth", mmap=True, weights_only=True)
    kept = {
        name: weight
        for name, weight in state.items()
        if not name.startswith("transformer.h.") or int(name.split(".")[2]) < layers
    }
    torch.save(kept, out / "lit_model.pth")
    draft_config = {**asdict(config), "n_layer": layers, "name": f"{config.name}-first{layers}"}
    (out / "model_config.yaml").write_text(yaml.safe_dump(draft_config))
    for name in ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "generation_config.json"):
        if (checkpoint_dir / name).is_file():
            shutil.copy(checkpoint_dir / name, out / name)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint_dir", type=Path)
    parser.add_argument("--layers", type=int, required=True, help="how many of the first blocks the draft keeps")
    parser.add_argument("--out", type=Path, help="the draft's folder (default: CHECKPOINT_DIR-firstN beside it)")
    args = parser.parse_args(argv)
    try:
        print(make_draft(args.checkpoint_dir, args.layers, args.out))
    except ValueError as error:
        parser.error(str(error))


if __name__ == "__main__":
    main()
