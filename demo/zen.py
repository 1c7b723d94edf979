"""A readable demo pair: a tiny target and a smaller draft trained on the Zen of Python, in seconds on a CPU.

The text ships with Python (the standard library's ``this`` module). A byte-level BPE tokenizer (``tokenizers``)
and both models are trained on it and saved in LitGPT's checkpoint layout, so ``litgpt generate``,
``litgpt generate_speculatively`` and ``LLM.load`` load them like any downloaded model. They are cached with their
recipe, and trained again when it changes.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from pathlib import Path

import torch
from litgpt import GPT, Config
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from demo import tiny_checkpoints

EOS = tiny_checkpoints.EOS
RECIPE = {
    "vocab_size": 320,
    "target": {"n_layer": 4, "n_embd": 192, "n_head": 4},
    "draft": {"n_layer": 1, "n_embd": 96, "n_head": 2},
    "steps": {"target": 250, "draft": 80},  # a draft that knows the text less well: not every token is accepted
    "batch_size": 8,
    "window": 64,
    "lr": 3e-3,
    "seed": 0,
}


def zen_of_python() -> str:
    with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints the Zen
        import this
    return "".join(this.d.get(c, c) for c in this.s)


def train_tokenizer(text: str, vocab_size: int) -> Tokenizer:
    """Byte-level BPE, as GPT-2 style models use: decoding gives the text back exactly, newlines included."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator([text], trainer=trainer)
    return tokenizer


def train_model(config: dict, data: torch.Tensor, recipe: dict, steps: int) -> GPT:
    """Next-token training on random windows of the text until the model knows it by heart."""
    torch.manual_seed(recipe["seed"])
    model = GPT(Config(**config))
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe["lr"])
    window = recipe["window"]
    for step in range(steps):
        starts = torch.randint(0, data.numel() - window - 1, (recipe["batch_size"],))
        x = torch.stack([data[s : s + window] for s in starts])
        y = torch.stack([data[s + 1 : s + window + 1] for s in starts])
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for group in optimizer.param_groups:  # linear decay: a clean memorized text by the last step
            group["lr"] = recipe["lr"] * (1 - (step + 1) / steps)
    model.loss = loss.item()
    return model.eval()


def build_zen_pair(root: Path, recipe: dict = RECIPE) -> tuple[Path, Path]:
    """Train (or reuse from ``root``/zen, if trained with the same recipe) the Zen draft and target.

    Returns their checkpoint folders, ``root``/zen/draft and ``root``/zen/target.
    """
    stamp = json.dumps(recipe, sort_keys=True)
    draft_dir, target_dir = root / "zen" / "draft", root / "zen" / "target"
    recipe_file = root / "zen" / "recipe.json"
    trained = (target_dir / "lit_model.pth").is_file() and (draft_dir / "lit_model.pth").is_file()
    if trained and recipe_file.is_file() and recipe_file.read_text() == stamp:
        return draft_dir, target_dir

    t0 = time.perf_counter()
    text = zen_of_python()
    tokenizer = train_tokenizer(text, recipe["vocab_size"])
    ids = tokenizer.encode(text).ids + [tokenizer.token_to_id(EOS)]
    data = torch.tensor(ids * 4)  # the text a few times over, so windows wrap around its end and start
    vocab = tokenizer.get_vocab_size()
    for name, folder in (("target", target_dir), ("draft", draft_dir)):
        config = {
            **tiny_checkpoints.tiny_config(vocab, name=f"zen-{name}"),
            **recipe[name],
            "block_size": 512,
        }
        model = train_model(config, data, recipe, recipe["steps"][name])
        tiny_checkpoints.save_checkpoint(folder, model, config, tokenizer)
        print(f"trained the {name} ({recipe[name]}) to loss {model.loss:.3f}")
    recipe_file.write_text(stamp)
    print(f"trained tokenizer and models in {time.perf_counter() - t0:.1f} s, saved under {target_dir.parent}")
    return draft_dir, target_dir


if __name__ == "__main__":
    # the demo's pair, trained once into build/demo (as `python -m demo.run` does), for `make test` to share
    build_zen_pair(Path(__file__).resolve().parent.parent / "build" / "demo")
