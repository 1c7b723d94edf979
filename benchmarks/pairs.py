"""Draft/target pairs for the benchmarks, built in seconds without downloads.

A controlled acceptance rate: a GPT-NeoX (Pythia layout) target whose layers after the first have zeroed attention and
MLP output projections computes the same function as its first layer, which with the same embeddings and head is the
draft (alpha = 1). Noise of a given scale on those projections makes the target differ from the draft and lowers
alpha. `set_noise` changes the target in place, so compiled code is reused from one acceptance rate to the next.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from litgpt import GPT, Config
from litgpt.prompts import PromptStyle
from litgpt.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parent.parent


def target_config(name: str, block_size: int, n_layer: int | None = None, vocab: int | None = None) -> Config:
    """LitGPT's config `name`, optionally with fewer layers or a smaller vocabulary (for CPUs)."""
    overrides: dict = {"block_size": block_size}
    if n_layer is not None:
        overrides["n_layer"] = n_layer
    if vocab is not None:
        overrides.update(vocab_size=vocab, padded_vocab_size=vocab)
    return Config.from_name(name, **overrides)


def controlled_pair(config: Config, device: torch.device, dtype: torch.dtype) -> tuple[GPT, GPT]:
    """The target of `config` with alpha = 1 (see `set_noise`) and, as draft, its first layer, embeddings and head."""
    torch.manual_seed(0)
    target = GPT(config)
    draft = GPT(dataclasses.replace(config, n_layer=1))
    draft.load_state_dict({k: v for k, v in target.state_dict().items() if k in draft.state_dict()})
    set_noise(target, 0.0)
    return draft.to(device=device, dtype=dtype).eval(), target.to(device=device, dtype=dtype).eval()


@torch.no_grad()
def set_noise(target: GPT, noise: float, seed: int = 1) -> None:
    """Output projections of the layers after the first: zero (the target is its first layer), or N(0, noise)."""
    generator = torch.Generator().manual_seed(seed)
    for block in target.transformer.h[1:]:
        for proj in (block.attn.proj, block.mlp.proj):
            proj.weight.copy_(torch.randn(proj.weight.shape, generator=generator) * noise)
            if proj.bias is not None:
                proj.bias.zero_()


def load_checkpoint(checkpoint_dir: Path, device: torch.device, dtype: torch.dtype) -> GPT:
    model = GPT(Config.from_file(checkpoint_dir / "model_config.yaml"))
    model.load_state_dict(torch.load(checkpoint_dir / "lit_model.pth", weights_only=True))
    return model.to(device=device, dtype=dtype).eval()


def zen_pair(device: torch.device, dtype: torch.dtype) -> tuple[GPT, GPT, Tokenizer]:
    """The demo's draft and target, trained on the Zen of Python (cached under build/demo), and their tokenizer."""
    from demo import zen

    draft_dir, target_dir = zen.build_zen_pair(ROOT / "build" / "demo")
    return load_checkpoint(draft_dir, device, dtype), load_checkpoint(target_dir, device, dtype), Tokenizer(target_dir)


def smollm2_dir() -> Path:
    """The SmolLM2-135M-Instruct checkpoint, made by tools/smollm2.py on first use (cached under build/smollm2)."""
    from tools import smollm2

    return smollm2.make_checkpoint()


def smollm2_pair(device: torch.device, dtype: torch.dtype, draft_layers: int = 4) -> tuple[GPT, GPT, Tokenizer, list]:
    """SmolLM2-135M-Instruct (made by tools/smollm2.py, cached under build/smollm2), a draft of its first blocks, its
    tokenizer, and the real chat prompts of tools/smollm2.py with its chat template applied, as token ids."""
    from tools import layer_draft, smollm2

    target_dir = smollm2_dir()
    draft_dir = layer_draft.make_draft(target_dir, draft_layers)
    draft, target = load_checkpoint(draft_dir, device, dtype), load_checkpoint(target_dir, device, dtype)
    tokenizer, style = Tokenizer(target_dir), PromptStyle.from_config(target.config)
    return draft, target, tokenizer, [tokenizer.encode(style.apply(p), device=device) for p in smollm2.PROMPTS]


def hf_models(draft: GPT, target: GPT, workdir: Path) -> list:
    """The same weights in transformers, converted from LitGPT checkpoints with LitGPT's convert_lit_checkpoint."""
    from litgpt.scripts.convert_lit_checkpoint import convert_lit_checkpoint
    from litgpt.utils import save_config
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    models = []
    for name, model in (("draft", draft), ("target", target)):
        lit_dir, hf_dir = workdir / f"lit-{name}", workdir / f"hf-{name}"
        lit_dir.mkdir(parents=True)
        save_config(model.config, lit_dir)
        torch.save(model.state_dict(), lit_dir / "lit_model.pth")
        convert_lit_checkpoint(lit_dir, hf_dir)
        cfg = model.config
        hf = GPTNeoXForCausalLM(
            GPTNeoXConfig(
                hidden_act="gelu",
                hidden_size=cfg.n_embd,
                num_attention_heads=cfg.n_head,
                num_hidden_layers=cfg.n_layer,
                intermediate_size=cfg.intermediate_size,
                layer_norm_eps=cfg.norm_eps,
                max_position_embeddings=cfg.block_size,
                rotary_emb_base=cfg.rope_base,
                rotary_pct=cfg.rotary_percentage,
                vocab_size=cfg.padded_vocab_size,
                use_parallel_residual=cfg.parallel_residual,
                tie_word_embeddings=False,
                attn_implementation="sdpa",
            )
        )
        hf.load_state_dict(torch.load(hf_dir / "model.pth"), strict=False)
        hf.generation_config.pad_token_id = 0
        hf.generation_config.eos_token_id = None
        param = next(model.parameters())
        models.append(hf.to(device=param.device, dtype=param.dtype).eval())
    return models


def sync_hf_noise(target: GPT, hf_target) -> None:
    """Copies the target's output projections (after `set_noise`) into its transformers counterpart."""
    with torch.no_grad():
        for block, hf_layer in zip(target.transformer.h, hf_target.gpt_neox.layers):
            hf_layer.attention.dense.weight.copy_(block.attn.proj.weight)
            hf_layer.attention.dense.bias.copy_(block.attn.proj.bias)
            hf_layer.mlp.dense_4h_to_h.weight.copy_(block.mlp.proj.weight)
            hf_layer.mlp.dense_4h_to_h.bias.copy_(block.mlp.proj.bias)
