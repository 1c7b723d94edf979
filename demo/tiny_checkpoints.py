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


def tiny_config(
    vocab_size: int,
    n_layer: int = 2,
    n_embd: int = 32,
    n_head: int = 4,
    name: str = "tiny",
    padded_vocab_size: int | None = None,
) -> dict:
    """A GPT config small enough to build and run in milliseconds (GPT-NeoX style, as LitGPT's default)."""
    return dict(
        name=name,
        vocab_size=vocab_size,
        padded_vocab_size=padded_vocab_size or vocab_size,
        block_size=256,
        n_layer=n_layer,
        n_head=n_head,
        n_embd=n_embd,
    )


def random_model(config: dict, seed: int) -> GPT:
    torch.manual_seed(seed)
    return GPT(Config(**config))


def truncated_draft(target: GPT, config: dict | Config, sharpness: float = 3.0) -> GPT:
    """A draft made of the target's first layers, embeddings and head, with the head ``sharpness`` times sharper.

    It agrees with the target on many tokens but is more confident than the target, as small drafts often are:
    the case in which LitGPT 0.5.13's greedy speculative decoding departs from the target's own output.
    """
    draft = GPT(config if isinstance(config, Config) else Config(**config))
    with torch.no_grad():
        for name, weight in draft.state_dict().items():
            source = target.state_dict()[name]
            # embeddings and head: the rows both have (the draft may pad its vocabulary to another size)
            rows = min(weight.size(0), source.size(0)) if weight.dim() else None
            weight[:rows].copy_(source[:rows])
        draft.lm_head.weight.mul_(sharpness)
    return draft


def save_checkpoint(checkpoint_dir: Path, model: GPT, config: dict, tokenizer: Tokenizer) -> Path:
    """Write ``model`` in LitGPT's checkpoint layout (what ``litgpt download`` + conversion produce)."""
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    (checkpoint_dir / "model_config.yaml").write_text(yaml.safe_dump(config))
    torch.save(model.state_dict(), checkpoint_dir / "lit_model.pth")
    tokenizer.save(str(checkpoint_dir / "tokenizer.json"))
    tokenizer_config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": EOS, "add_bos_token": False}
    (checkpoint_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return checkpoint_dir


def build_pair(
    root: Path,
    same: bool = False,
    seed: int = 0,
    padded_vocab_sizes: tuple[int, int] | None = None,
    draft_words: list[str] = WORDS,
) -> tuple[Path, Path]:
    """Save a 2-layer random target and a 1-layer truncated draft (or, with ``same``, the target as draft).

    ``padded_vocab_sizes`` (draft, target) pads the models' vocabularies as real checkpoints do (Qwen2.5-0.5B and
    Qwen2.5-7B differ so); ``draft_words`` gives the draft another tokenizer.
    """
    tokenizer = word_tokenizer()
    draft_padded, target_padded = padded_vocab_sizes or (None, None)
    target_config = tiny_config(tokenizer.get_vocab_size(), name="tiny-target", padded_vocab_size=target_padded)
    target = random_model(target_config, seed)
    if same:
        draft, draft_config = target, target_config
    else:
        draft_config = {**target_config, "n_layer": 1, "name": "tiny-draft"}
        draft_config["padded_vocab_size"] = draft_padded or target_config["padded_vocab_size"]
        draft = truncated_draft(target, draft_config)
    target_dir = save_checkpoint(root / "target", target, target_config, tokenizer)
    draft_dir = save_checkpoint(root / "draft", draft, draft_config, word_tokenizer(draft_words))
    return draft_dir, target_dir
