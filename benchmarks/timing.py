"""Timing for the benchmarks: forward costs, whole generations, the loop's own overhead, and the k that "auto" picks."""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch
from litgpt import GPT, Config

ROOT = Path(__file__).resolve().parent.parent


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds(fn: Callable, device: torch.device):
    """Runs `fn()` and returns its result and the wall-clock seconds it took, device work included."""
    synchronize(device)
    t0 = time.perf_counter()
    result = fn()
    synchronize(device)
    return result, time.perf_counter() - t0


def fresh_cache(*models: GPT, max_seq_length: int) -> None:
    for model in models:
        model.max_seq_length = max_seq_length
        param = next(model.parameters())
        model.set_kv_cache(batch_size=1, device=param.device, dtype=param.dtype)


def load_module_copy(path: Path, name: str) -> ModuleType:
    """A separate copy of a module from its file, e.g. to compile its functions without touching the original."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as importlib's recipe: dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def load_upstream_module(dest: Path) -> ModuleType:
    """litgpt/generate/speculative_decoding.py of the pristine 0.5.13 sdist, beside the installed fork."""
    upstream_tree = load_module_copy(ROOT / "backend" / "upstream_tree.py", "upstream_tree")
    tree = upstream_tree.unpack_sdist(upstream_tree.fetch_sdist(upstream_tree.read_pin(ROOT)), dest)
    return load_module_copy(tree / "litgpt" / "generate" / "speculative_decoding.py", "speculative_decoding_0_5_13")


def compile_like_the_cli(speculative: ModuleType, base: ModuleType) -> None:
    """What `litgpt generate --compile` and `litgpt generate_speculatively --compile` do, on copies of the modules."""
    import torch._dynamo.config
    import torch._inductor.config

    torch._dynamo.config.automatic_dynamic_shapes = True
    torch._inductor.config.triton.unique_kernel_names = True
    torch._inductor.config.coordinate_descent_tuning = True
    base.next_token = torch.compile(base.next_token, mode="reduce-overhead")
    speculative.next_token = torch.compile(speculative.next_token, mode="reduce-overhead")
    speculative.sample_next_token = speculative._compile_with_static_shapes(speculative.sample_next_token)
    # verification, in a copy of its module too, which the copy of speculative_decoding then verifies with
    sampling = load_module_copy(Path(speculative.speculative_sampling.__file__), f"{speculative.__name__}_sampling")
    sampling.target_distributions = speculative._compile_with_static_shapes(sampling.target_distributions)
    speculative.verify = sampling.verify


@torch.inference_mode()
def forward_costs(draft: GPT, target: GPT, position: int, max_n: int, repeats: int = 20) -> tuple[float, dict]:
    """c = draft forward / target forward (1 token); v(n) = target forward on n tokens / on 1 token."""
    device = next(target.parameters()).device
    fresh_cache(draft, target, max_seq_length=target.config.block_size)
    vocab = target.config.vocab_size
    x = torch.randint(0, vocab, (1, max_n), device=device)
    for model in (draft, target):
        model(torch.randint(0, vocab, (1, position), device=device), torch.arange(position, device=device))

    def median_time(model, n):
        pos = torch.arange(position, position + n, device=device)
        times = [seconds(lambda: model(x[:, :n], pos, input_pos_maxp1=position + n), device)[1] for _ in range(repeats)]
        return statistics.median(times)

    t1 = median_time(target, 1)
    return median_time(draft, 1) / t1, {n: median_time(target, n) / t1 for n in range(1, max_n + 1)}


def bound(alpha: float, k: int, c: float, v: float) -> float:
    """Expected speedup of Leviathan et al. 2023 (Theorem 3.8) with a verification cost of v target forwards."""
    tokens = k + 1 if alpha >= 1.0 else (1 - alpha ** (k + 1)) / (1 - alpha)
    return tokens / (k * c + v)


@torch.inference_mode()
def agreement(draft: GPT, target: GPT, tokens: torch.Tensor, prompt_len: int) -> float:
    """alpha for greedy decoding: how often the draft's argmax is the target's, along the target's own output."""
    fresh_cache(draft, target, max_seq_length=tokens.numel())
    positions = torch.arange(tokens.numel(), device=tokens.device)
    same = draft(tokens[None], positions).argmax(-1) == target(tokens[None], positions).argmax(-1)
    return same[0, prompt_len - 1 : -1].float().mean().item()


class ChosenK:
    """Records the k that `speculative_k="auto"` chooses before each step (0: the target alone)."""

    def __init__(self, speculative: ModuleType) -> None:
        self.ks: list[int] = []
        cls = speculative.AutoSpeculativeK
        choose = cls.choose

        def recorded(auto_k) -> int:
            k = choose(auto_k)
            self.ks.append(k)
            return k

        cls.choose = recorded


@torch.inference_mode()
def hf_generate(hf_draft, hf_target, prompt: torch.Tensor, new_tokens: int, schedule: int | str | None):
    """transformers' generation: alone (None), assisted with k tokens per round (int), or its own "default" or
    "heuristic" schedule of assistant tokens."""
    kwargs = dict(do_sample=False, max_new_tokens=new_tokens, min_new_tokens=new_tokens)
    if schedule is not None:
        config, defaults = hf_draft.generation_config, type(hf_draft.generation_config)()
        if isinstance(schedule, int):
            config.num_assistant_tokens, config.num_assistant_tokens_schedule = schedule, "constant"
            config.assistant_confidence_threshold = 0.0
        else:
            config.num_assistant_tokens = defaults.num_assistant_tokens
            config.num_assistant_tokens_schedule = (
                defaults.num_assistant_tokens_schedule if schedule == "default" else schedule
            )
            config.assistant_confidence_threshold = defaults.assistant_confidence_threshold
        kwargs["assistant_model"] = hf_draft
    out = hf_target.generate(prompt[None], attention_mask=torch.ones_like(prompt[None]), **kwargs)
    return out[0]


class FixedLogits(torch.nn.Module):
    """A model that costs next to nothing: generate() timed with it is the loop's own overhead."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("logits", logits)
        self.config = Config(padded_vocab_size=logits.numel())
        self.max_seq_length = 1 << 20
        self.calls = 0

    def forward(self, idx: torch.Tensor, input_pos=None, input_pos_maxp1=None, logits_to_keep: int = 0) -> torch.Tensor:
        self.calls += 1
        return self.logits.expand(1, logits_to_keep or idx.size(1), -1)


def loop_overhead(modules: dict[str, ModuleType], ks: tuple[int, ...], new_tokens: int, repeats: int) -> list[dict]:
    """Milliseconds per round outside model forwards for each module, sampled at temperature 1, interleaved."""
    torch.manual_seed(0)
    draft, target = FixedLogits(torch.randn(64)), FixedLogits(torch.randn(64))
    prompt = torch.tensor([1, 2, 3])
    rows = []
    for k in ks:
        ms: dict[str, list[float]] = {name: [] for name in modules}
        for repeat in range(repeats):
            order = list(modules.items())
            for name, module in order[:: 1 if repeat % 2 == 0 else -1]:
                torch.manual_seed(repeat)
                target.calls = 0
                t0 = time.perf_counter()
                module.generate(draft, target, prompt, 3 + new_tokens, temperature=1.0, speculative_k=k)
                ms[name].append(1000 * (time.perf_counter() - t0) / (target.calls - 1))
        rows.append({"k": k, **{name: statistics.median(v) for name, v in ms.items()}})
    return rows
