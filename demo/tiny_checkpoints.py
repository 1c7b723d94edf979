"""Build tiny LitGPT checkpoints on the CPU in a second, so the real loading code and CLI can run without downloads.

A checkpoint folder holds what ``litgpt generate`` expects: ``model_config.yaml``, ``lit_model.pth`` and a real
``tokenizers`` tokenizer (``tokenizer.json``) with its ``tokenizer_config.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import yaml
from litgpt import GPT, Config
from tokenizers import Tokenizer, models, pre_tokenizers

EOS = "<eos>"
WORDS = (
    "the a llama alpaca eats grass hay leaves food water and or in on under over field farm mountain valley sun "
    "rain snow morning evening quickly slowly happily green brown white small large young old runs sleeps walks "
    "sings jumps with near far from to of is was are were"
).split()


def word_tokenizer(words: list[str] = WORDS) -> Tokenizer:
    """A word-level tokenizer: ids 0 and 1 are ``<unk>`` and the special ``<eos>``, then one id per word."""
    vocab = {token: i for i, token in enumerate(["<unk>", EOS, *words])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens([EOS])  # as in real tokenizers: decoding leaves it out
    return tokenizer


def tiny_config(vocab_size: int, n_layer: int = 2, n_embd: int = 32, n_head: int = 4, name: str = "tiny") -> dict:
    """A GPT config small enough to build and run in milliseconds (GPT-NeoX style, as LitGPT's default)."""
    return dict(
        name=name,
        vocab_size=vocab_size,
        padded_vocab_size=vocab_size,
        block_size=256,
        n_layer=n_layer,
        n_head=n_head,
        n_embd=n_embd,
    )


def random_model(config: dict, seed: int, logit_scale: float = 10.0) -> GPT:
    """A random model whose next-token logits are well separated, so greedy decoding has no near-ties."""
    torch.manual_seed(seed)
    model = GPT(Config(**config))
    with torch.no_grad():
        model.lm_head.weight.mul_(logit_scale)
    return model


def save_checkpoint(checkpoint_dir: Path, model: GPT, config: dict, tokenizer: Tokenizer) -> Path:
    """Write ``model`` in LitGPT's checkpoint layout (what ``litgpt download`` + conversion produce)."""
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    (checkpoint_dir / "model_config.yaml").write_text(yaml.safe_dump(config))
    torch.save(model.state_dict(), checkpoint_dir / "lit_model.pth")
    tokenizer.save(str(checkpoint_dir / "tokenizer.json"))
    tokenizer_config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": EOS, "add_bos_token": False}
    (checkpoint_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return checkpoint_dir


def build_pair(root: Path, draft_seed: int | None = None, target_seed: int = 0) -> tuple[Path, Path]:
    """Save a target and a draft checkpoint under ``root``; ``draft_seed=None`` makes the draft equal the target.

    A different seed gives a smaller draft (1 layer) that disagrees with the target on some tokens.
    """
    tokenizer = word_tokenizer()
    vocab_size = tokenizer.get_vocab_size()
    target_config = tiny_config(vocab_size, n_layer=2, name="tiny-target")
    target = random_model(target_config, target_seed)
    if draft_seed is None:
        draft_config, draft = target_config, target
    else:
        draft_config = tiny_config(vocab_size, n_layer=1, name="tiny-draft")
        draft = random_model(draft_config, draft_seed)
    target_dir = save_checkpoint(root / "target", target, target_config, tokenizer)
    draft_dir = save_checkpoint(root / "draft", draft, draft_config, tokenizer)
    return draft_dir, target_dir
