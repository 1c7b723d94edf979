"""How fast is speculative decoding here, against what it could be and against what users would pick instead?

    python benchmarks/speculative_speed.py                  # full run, ~15 minutes on 2 CPU cores
    python benchmarks/speculative_speed.py --quick --out DIR  # tiny configuration, seconds (CI smoke test)

Draft/target pairs with a controlled acceptance rate: the target is a GPT-NeoX (Pythia-style) model whose layers
after the first have zeroed attention and MLP output projections, so it computes the same function as its first
layer; the draft is that first layer with the same embeddings and head (acceptance rate alpha ~ 1). Noise of a
given scale on the zeroed projections makes the target differ from the draft and lowers alpha.

For each pair and k, interleaved and repeated, on the same prompt: greedy tokens/s of target-only decoding
(`litgpt.generate.base`), of the installed fork's speculative decoding and of transformers' assisted generation on
the same weights (converted with LitGPT's `convert_lit_checkpoint`); the measured alpha, the draft/target cost
ratio c and the cost v(k+1) of verifying k+1 tokens (in target forwards), the bound of Leviathan et al. 2023 with
those costs and efficiency = speedup / bound; and, sampled with the same seeds (the same work for both), the fork
against unpatched 0.5.13 (its module loaded from the pristine sdist), with the loop's own overhead per round.
Writes results.json, results.md and speedup.png to --out.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import litgpt.generate.speculative_decoding as fork_speculative
import torch
from litgpt import GPT, Config
from litgpt.generate import base

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "backend"))
import upstream_tree  # noqa: E402


@dataclass(frozen=True)
class Setup:
    n_layer: int
    n_embd: int
    n_head: int
    vocab: int
    prompt_len: int
    new_tokens: int
    ks: tuple[int, ...]
    noises: tuple[float, ...]
    repeats: int


FULL = Setup(8, 768, 12, 4096, 16, 64, tuple(range(1, 9)), (0.0, 0.001, 0.0025, 0.005), 5)
QUICK = Setup(2, 64, 4, 256, 4, 8, (1, 2), (0.0, 0.05), 1)


def pythia_config(setup: Setup, n_layer: int) -> Config:
    # Pythia (GPT-NeoX) has a transformers counterpart, GPTNeoXForCausalLM
    return Config.from_name(
        "pythia-160m",
        n_layer=n_layer,
        n_embd=setup.n_embd,
        n_head=setup.n_head,
        intermediate_size=4 * setup.n_embd,
        vocab_size=setup.vocab,
        padded_vocab_size=setup.vocab,
        block_size=setup.prompt_len + setup.new_tokens + 16,
    )


def build_pair(setup: Setup, noise: float, seed: int = 0) -> tuple[GPT, GPT]:
    torch.manual_seed(seed)
    target = GPT(pythia_config(setup, setup.n_layer))
    with torch.no_grad():
        for block in target.transformer.h[1:]:
            for proj in (block.attn.proj, block.mlp.proj):
                proj.weight.normal_(0.0, noise) if noise else proj.weight.zero_()
                proj.bias.zero_()
    draft = GPT(pythia_config(setup, 1))
    draft.load_state_dict({k: v for k, v in target.state_dict().items() if k in draft.state_dict()})
    return draft.eval(), target.eval()


def load_upstream_module(dest: Path):
    """litgpt/generate/speculative_decoding.py of the pristine 0.5.13 sdist, beside the installed fork."""
    pin = upstream_tree.read_pin(ROOT)
    tree = upstream_tree.unpack_sdist(upstream_tree.fetch_sdist(pin), dest)
    spec = importlib.util.spec_from_file_location(
        "speculative_decoding_0_5_13", tree / "litgpt" / "generate" / "speculative_decoding.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ForwardTimer:
    """Counts and times a model's forward calls, to separate the loop's own time from the models'."""

    def __init__(self, *models: GPT) -> None:
        self.seconds, self.calls = 0.0, {id(m): 0 for m in models}
        for model in models:
            model.forward = self._wrap(model, model.forward)

    def _wrap(self, model, forward):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            out = forward(*args, **kwargs)
            self.seconds += time.perf_counter() - t0
            self.calls[id(model)] += 1
            return out

        return timed

    def reset(self) -> None:
        self.seconds, self.calls = 0.0, dict.fromkeys(self.calls, 0)


def fresh_cache(*models: GPT, max_seq_length: int) -> None:
    for model in models:
        model.max_seq_length = max_seq_length
        model.set_kv_cache(batch_size=1)


@torch.inference_mode()
def forward_costs(draft: GPT, target: GPT, setup: Setup, repeats: int = 20) -> tuple[float, dict[int, float]]:
    """c = draft forward / target forward (1 token); v(n) = target forward on n tokens / on 1 token."""
    fresh_cache(draft, target, max_seq_length=target.config.block_size)
    pos = setup.prompt_len + setup.new_tokens // 2
    x = torch.randint(0, setup.vocab, (1, max(setup.ks) + 1))
    for model in (draft, target):
        model(torch.randint(0, setup.vocab, (1, pos)), torch.arange(pos))

    def median_time(model, n):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(x[:, :n], torch.arange(pos, pos + n), input_pos_maxp1=pos + n)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    t1 = median_time(target, 1)
    c = median_time(draft, 1) / t1
    v = {n: median_time(target, n) / t1 for n in range(1, max(setup.ks) + 2)}
    return c, v


def bound(alpha: float, k: int, c: float, v: float) -> float:
    """Expected speedup of Leviathan et al. 2023 (Theorem 3.8) with a verification cost of v target forwards."""
    tokens = k + 1 if alpha >= 1.0 else (1 - alpha ** (k + 1)) / (1 - alpha)
    return tokens / (k * c + v)


def hf_models(draft: GPT, target: GPT, workdir: Path):
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
        models.append(hf.eval())
    return models


@torch.inference_mode()
def hf_generate(hf_draft, hf_target, prompt: torch.Tensor, setup: Setup, k: int | None) -> torch.Tensor:
    kwargs = dict(do_sample=False, max_new_tokens=setup.new_tokens, min_new_tokens=setup.new_tokens)
    if k is not None:
        hf_draft.generation_config.num_assistant_tokens = k
        hf_draft.generation_config.num_assistant_tokens_schedule = "constant"
        hf_draft.generation_config.assistant_confidence_threshold = 0.0
        kwargs["assistant_model"] = hf_draft
    out = hf_target.generate(prompt[None], attention_mask=torch.ones_like(prompt[None]), **kwargs)
    return out[0]


@torch.inference_mode()
def agreement(draft: GPT, target: GPT, tokens: torch.Tensor, prompt_len: int) -> float:
    """alpha for greedy decoding: how often the draft's argmax is the target's, along the target's own output."""
    fresh_cache(draft, target, max_seq_length=tokens.numel())
    positions = torch.arange(tokens.numel())
    same = draft(tokens[None], positions).argmax(-1) == target(tokens[None], positions).argmax(-1)
    return same[0, prompt_len - 1 : -1].float().mean().item()


def timed(fn, timer: ForwardTimer, prompt_len: int) -> tuple[torch.Tensor, tuple[float, float, float, float]]:
    """Run one generation: its output, and its seconds per new token, acceptance rate, overhead per round, seconds."""
    timer.reset()
    t0 = time.perf_counter()
    out, rate = fn()
    seconds = time.perf_counter() - t0
    rounds = max(max(timer.calls.values()) - 1, 1)  # target forwards minus prefill
    return out, (seconds / (out.size(0) - prompt_len), rate, (seconds - timer.seconds) / rounds, seconds)


class FixedLogits(torch.nn.Module):
    """A model that costs next to nothing: generate() timed with it is the loop's own overhead."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("logits", logits)
        self.max_seq_length = 1 << 20
        self.calls = 0

    def forward(self, idx: torch.Tensor, input_pos=None, input_pos_maxp1=None) -> torch.Tensor:
        self.calls += 1
        return self.logits.expand(1, idx.size(1), -1)


def loop_overhead(upstream, setup: Setup, repeats: int) -> list[dict]:
    """Milliseconds per round outside model forwards, fork vs 0.5.13, on the same rounds (sampled, same seeds)."""
    torch.manual_seed(0)
    draft, target = FixedLogits(torch.randn(64)), FixedLogits(torch.randn(64))
    prompt = torch.tensor([1, 2, 3])
    rows = []
    for k in setup.ks:
        ms = {"fork": [], "0.5.13": []}
        for repeat in range(repeats):
            order = (("fork", fork_speculative), ("0.5.13", upstream))
            for name, module in order[:: 1 if repeat % 2 == 0 else -1]:
                torch.manual_seed(repeat)
                target.calls = 0
                t0 = time.perf_counter()
                module.generate(draft, target, prompt, 3 + setup.new_tokens, temperature=1.0, speculative_k=k)
                ms[name].append(1000 * (time.perf_counter() - t0) / (target.calls - 1))
        rows.append({"k": k, **{name: statistics.median(v) for name, v in ms.items()}})
    return rows


def run(setup: Setup, with_transformers: bool) -> dict:
    torch.manual_seed(1234)
    prompt = torch.randint(0, setup.vocab, (setup.prompt_len,))
    max_returned = setup.prompt_len + setup.new_tokens
    tmp = Path(tempfile.mkdtemp(prefix="spec-bench-"))
    upstream = load_upstream_module(tmp / "upstream")
    results = {"setup": asdict(setup), "pairs": []}

    for noise in setup.noises:
        draft, target = build_pair(setup, noise)
        c, v = forward_costs(draft, target, setup)
        timer = ForwardTimer(draft, target)
        hf = hf_models(draft, target, tmp / f"hf-{noise}") if with_transformers else None
        samples: dict = {}  # (what, k) -> list of (seconds per token, acceptance rate, overhead per round, seconds)

        def record(key, measurement):
            samples.setdefault(key, []).append(measurement)

        expected = None
        for repeat in range(setup.repeats):  # interleaved: each repeat measures everything once
            fresh_cache(target, max_seq_length=max_returned)
            t0 = time.perf_counter()
            expected = base.generate(target, prompt, max_returned, temperature=0.0)
            record(("target", 0), ((time.perf_counter() - t0) / setup.new_tokens, 0.0, 0.0, 0.0))
            for k in setup.ks:
                fresh_cache(draft, target, max_seq_length=max_returned)
                out, measurement = timed(
                    lambda: fork_speculative.generate(
                        draft, target, prompt, max_returned, temperature=0.0, speculative_k=k
                    ),
                    timer,
                    setup.prompt_len,
                )
                if not torch.equal(out, expected):
                    raise AssertionError(f"fork output differs from target-only greedy (noise {noise}, k {k})")
                record(("fork", k), measurement)
                # the same work for both implementations: sampling at temperature 1 with the same seed, where
                # 0.5.13's rule is already correct, draws the same tokens (the fork returns one more, the first)
                pair_order = (("fork sampled", fork_speculative), ("0.5.13 sampled", upstream))
                for impl, module in pair_order[:: 1 if repeat % 2 == 0 else -1]:  # alternate who runs first
                    fresh_cache(draft, target, max_seq_length=max_returned)
                    torch.manual_seed(repeat)
                    _, measurement = timed(
                        lambda: module.generate(draft, target, prompt, max_returned, temperature=1.0, speculative_k=k),
                        timer,
                        setup.prompt_len,
                    )
                    record((impl, k), measurement)
                if hf is not None:
                    t0 = time.perf_counter()
                    hf_out = hf_generate(*hf, prompt, setup, k)
                    record(("transformers", k), ((time.perf_counter() - t0) / setup.new_tokens, 0.0, 0.0, 0.0))
                    if not torch.equal(hf_out, expected):
                        raise AssertionError(f"transformers' tokens differ from ours (noise {noise}, k {k})")
            if hf is not None:
                t0 = time.perf_counter()
                hf_generate(*hf, prompt, setup, None)
                record(("transformers", 0), ((time.perf_counter() - t0) / setup.new_tokens, 0.0, 0.0, 0.0))

        alpha = agreement(draft, target, expected, setup.prompt_len)
        target_per_token = statistics.median(m[0] for m in samples[("target", 0)])

        def summary(key):
            if key not in samples:
                return None
            per_token = [m[0] for m in samples[key]]
            mid = statistics.median(per_token)
            return {
                "tokens_per_s": 1 / mid,
                "spread": (max(per_token) - min(per_token)) / mid,
                "speedup": target_per_token / mid,
                "acceptance_rate": statistics.median(m[1] for m in samples[key]),
                "overhead_ms": 1000 * statistics.median(m[2] for m in samples[key]),
                "seconds": statistics.median(m[3] for m in samples[key]),
            }

        rows = []
        for k in setup.ks:
            row = {"k": k, "v": v[k + 1], "bound": bound(alpha, k, c, v[k + 1])}
            for what in ("fork", "fork sampled", "0.5.13 sampled", "transformers"):
                row[what] = summary((what, k))
            row["efficiency"] = row["fork"]["speedup"] / row["bound"]
            rows.append(row)
        pair = {"noise": noise, "alpha": alpha, "c": c, "target_tokens_per_s": 1 / target_per_token, "rows": rows}
        if ("transformers", 0) in samples:
            pair["transformers_target_tokens_per_s"] = summary(("transformers", 0))["tokens_per_s"]
        results["pairs"].append(pair)
        print(markdown_pair(pair), flush=True)
    results["loop_overhead"] = loop_overhead(upstream, setup, repeats=40 * setup.repeats)
    print(markdown_overhead(results["loop_overhead"]), flush=True)
    return results


def markdown_overhead(rows: list[dict]) -> str:
    lines = [
        "\n### Loop overhead per round, with models that cost nothing (fixed logits; sampled, same seeds)\n",
        "| k | fork (ms) | 0.5.13 (ms) | fork/0.5.13 |",
        "|---|---|---|---|",
    ]
    lines += [f"| {r['k']} | {r['fork']:.3f} | {r['0.5.13']:.3f} | {r['fork'] / r['0.5.13']:.3f} |" for r in rows]
    return "\n".join(lines)


def markdown_pair(pair: dict) -> str:
    hf_alone = pair.get("transformers_target_tokens_per_s")
    head = (
        f"\n### α = {pair['alpha']:.2f} (noise {pair['noise']}): c = {pair['c']:.3f}, LitGPT target-only "
        f"{pair['target_tokens_per_s']:.1f} tokens/s"
        + (f", transformers target-only {hf_alone:.1f} tokens/s" if hf_alone else "")
        + "\n\n| k | v(k+1) | bound | fork tok/s | speedup | efficiency | accepted/proposed | overhead/round (ms) "
        "| sampled: fork tok/s | 0.5.13 tok/s | fork/0.5.13 time, same rounds | overhead/round fork, 0.5.13 (ms) "
        "| transformers tok/s | fork/transformers speed |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in pair["rows"]:
        fork, fs, old, hf = r["fork"], r["fork sampled"], r["0.5.13 sampled"], r["transformers"]
        lines.append(
            f"| {r['k']} | {r['v']:.2f} | {r['bound']:.2f} | {fork['tokens_per_s']:.1f} ±{fork['spread'] / 2:.0%} "
            f"| {fork['speedup']:.2f} | {r['efficiency']:.2f} | {fork['acceptance_rate']:.2f} "
            f"| {fork['overhead_ms']:.2f} "
            f"| {fs['tokens_per_s']:.1f} ±{fs['spread'] / 2:.0%} | {old['tokens_per_s']:.1f} ±{old['spread'] / 2:.0%} "
            f"| {fs['seconds'] / old['seconds']:.3f} | {fs['overhead_ms']:.2f}, {old['overhead_ms']:.2f} "
            + (f"| {hf['tokens_per_s']:.1f} | {fork['tokens_per_s'] / hf['tokens_per_s']:.2f} |" if hf else "| – | – |")
        )
    return head + "\n".join(lines)


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = results["pairs"]
    fig, axes = plt.subplots(1, len(pairs), figsize=(4.2 * len(pairs), 3.8), sharey=True, squeeze=False)
    for ax, pair in zip(axes[0], pairs):
        ks = [r["k"] for r in pair["rows"]]
        ax.plot(ks, [r["bound"] for r in pair["rows"]], "k--", label="bound (measured c, v)")
        ax.plot(ks, [r["fork"]["speedup"] for r in pair["rows"]], "o-", label="fork, greedy")
        ax.plot(ks, [r["fork sampled"]["speedup"] for r in pair["rows"]], "o:", label="fork, sampled (T=1)")
        ax.plot(ks, [r["0.5.13 sampled"]["speedup"] for r in pair["rows"]], "s:", label="0.5.13, sampled (T=1)")
        if pair["rows"][0]["transformers"]:
            ax.plot(ks, [r["transformers"]["speedup"] for r in pair["rows"]], "^-", label="transformers, greedy")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_title(f"α = {pair['alpha']:.2f} (noise {pair['noise']})")
        ax.set_xlabel("k (draft tokens per round)")
    axes[0][0].set_ylabel("speedup over LitGPT target-only")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny configuration for a smoke test")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--no-transformers", action="store_true", help="skip transformers' assisted generation")
    args = parser.parse_args()
    setup = QUICK if args.quick else FULL
    results = run(setup, with_transformers=not args.no_transformers)
    results["machine"] = {
        "date": datetime.date.today().isoformat(),
        "platform": platform.platform(),
        "processor": platform.machine(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "litgpt": importlib.metadata.version("litgpt"),
        "python": platform.python_version(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    m = results["machine"]
    md = [
        f"# Speculative decoding speed, {m['date']}",
        "",
        f"Machine: {m['platform']}, {m['torch_threads']} torch threads; torch {m['torch']}, litgpt {m['litgpt']}, "
        f"Python {m['python']}. Prompt {setup.prompt_len} tokens, {setup.new_tokens} new tokens, median of "
        f"{setup.repeats} interleaved repeats (± is half the min–max spread). Target: {setup.n_layer} layers × "
        f"{setup.n_embd} (GPT-NeoX/Pythia layout), vocabulary {setup.vocab}; draft: its first layer, embeddings and "
        "head. α is how often the draft's greedy token is the target's along the target's output; c and v(k+1) are "
        "measured forward costs in target forwards; bound = Leviathan et al. 2023's expected speedup with them.",
        "",
        "- Greedy columns: the fork (output checked equal to target-only), speedup over LitGPT target-only greedy, "
        "efficiency = speedup / bound, and transformers' assisted generation on the same weights (tokens checked "
        "equal to ours).",
        "- Sampled columns (temperature 1, same seed): the fork and unpatched 0.5.13 do the same work there (0.5.13's "
        "rule is correct when sampling with top_p = 1, and both run the same rounds and draw the same tokens; the "
        "fork also returns the prefill token), so the ratio of their times compares the implementations; "
        "overhead/round is the time outside model forwards per round.",
        *(markdown_pair(p) for p in results["pairs"]),
        markdown_overhead(results["loop_overhead"]),
        "",
        "![speedup vs k](speedup.png)",
        "",
    ]
    (args.out / "results.md").write_text("\n".join(md))
    plot(results, args.out / "speedup.png")
    print(f"\nwrote {args.out / 'results.md'}, {args.out / 'results.json'}, {args.out / 'speedup.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
