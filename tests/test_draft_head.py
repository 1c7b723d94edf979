"""A draft head as users make and use it: `litgpt train_draft --data ShareGPT` on a tiny checkpoint (a ShareGPT file
made here, the target's own answers to its prompts as data), then the head drafting in `litgpt generate_speculatively`,
`litgpt chat`, `LLM.generate` (one prompt, a list, a stream) and a real `litgpt serve` with 4 clients at once; its
refusals of another target and of generating alone.

The tiny target is random, so its own answers are what the head learns: trained for seconds, it agrees with the target
far more often than an untrained head, and every answer is the target's own.
"""

from __future__ import annotations

import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
import torch
from litgpt import LLM
from litgpt.generate.draft_head import DraftHead

from demo import tiny_checkpoints
from harness import litgpt_server

from . import litgpt_in_process

TEMPLATE = "{% for message in messages %}{{ message['content'] }} {% endfor %}"
PROMPTS = [
    "the llama eats grass and the alpaca eats hay",
    "old on sings runs walks mountain green grass",
    "a small brown alpaca walks near the farm",
    "rain and snow on the mountain in the evening",
]
TRAIN = [
    "--precision", "32-true", "--data", "ShareGPT", "--answers.prompts", "96", "--answers.only", "true",
    "--answers.prompt_tokens", "8", "--answers.answer_tokens", "32", "--train.epochs", "15", "--train.max_tokens",
    "null", "--train.log_interval", "50", "--eval.interval", "100", "--learning_rate", "3e-3",
    "--draft_vocab_size", "40",
]  # fmt: skip


def sharegpt_file(path):
    """ShareGPT's format: 120 conversations whose first turn is 3 to 6 words of the prompts (and a second exchange)."""
    words = " ".join(PROMPTS).split()
    generator = torch.Generator().manual_seed(0)

    def text(count):
        return " ".join(words[int(i)] for i in torch.randint(0, len(words), (count,), generator=generator))

    conversations = [
        {
            "id": str(i),
            "conversations": [
                {"from": "human", "value": text(3 + i % 4)},
                {"from": "gpt", "value": text(8)},
                {"from": "human", "value": text(3)},
                {"from": "gpt", "value": text(4)},
            ],
        }
        for i in range(120)
    ]
    path.write_text(json.dumps(conversations))
    return path


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("draft-head")
    _, target = tiny_checkpoints.build_pair(root)
    (target / "chat_template.jinja").write_text(TEMPLATE)
    data = ["--data.json_path", sharegpt_file(root / "sharegpt.json")]
    out, err = litgpt_in_process.litgpt("train_draft", target, "--out_dir", root / "head", *TRAIN, *data)
    # an untrained head of the same shape, as a user could save one
    untrained = root / "untrained"
    shutil.copytree(root / "head", untrained)
    head = DraftHead.from_checkpoint_dir(untrained)
    head.load_state_dict(torch.load(untrained / "lit_model.pth"))
    torch.manual_seed(0)
    for name in ("fc", "hidden_norm"):
        getattr(head, name).reset_parameters()
    head.transformer.h[0].apply(lambda m: m.reset_parameters() if hasattr(m, "reset_parameters") else None)
    head.save(untrained)
    return {
        "root": root,
        "target": target,
        "head": root / "head",
        "untrained": untrained,
        "log": out + err,
        "data": data,
    }


def test_train_draft_reports_its_progress_and_writes_a_draft(checkpoints):
    log, head = checkpoints["log"], checkpoints["head"]
    assert "The target answered 96 prompts" in log and "Training on 96 texts" in log
    assert "held-back acceptance per step ahead" in log and "tokens/s" in log
    for name in ("lit_model.pth", "model_config.yaml", "draft_head.yaml", "tokenizer.json", "train_state.pth"):
        assert (head / name).is_file(), name
    assert (head / "answers.pt").is_file() and (head / "target_outputs.pt").is_file()


def test_train_draft_resumes_from_its_out_dir(checkpoints, tmp_path):
    """From its last step, with the answers and the target's hidden states it kept."""
    out_dir = tmp_path / "head"
    shutil.copytree(checkpoints["head"], out_dir)
    more = [
        *TRAIN[: TRAIN.index("--train.epochs")],
        "--train.epochs",
        "16",
        *TRAIN[TRAIN.index("--train.epochs") + 2 :],
    ]
    out, err = litgpt_in_process.litgpt(
        "train_draft", checkpoints["target"], "--out_dir", out_dir, "--resume", "true", *more, *checkpoints["data"]
    )
    log = out + err
    resumed = int(re.search(r"Resuming from step (\d+)", log).group(1))
    assert resumed > 0 and "The target answered" not in log and "Read the target's hidden states" in log
    assert json.loads((out_dir / "training.json").read_text())["steps"] > resumed


@pytest.fixture(scope="module")
def llms(checkpoints):
    load = {name: LLM.load(str(checkpoints[name]), distribute=None) for name in ("target", "head", "untrained")}
    for llm in load.values():
        llm.distribute(accelerator="cpu", precision="32-true")
    return load


def test_llm_generate_with_the_head_answers_as_the_target_alone_and_accepts_more_than_untrained(llms):
    target, head = llms["target"], llms["head"]
    alone = [target.generate(p, max_new_tokens=24, temperature=0) for p in PROMPTS]
    acceptance = {}
    for name in ("head", "untrained"):
        answers = target.generate(PROMPTS, max_new_tokens=24, temperature=0, draft_model=llms[name], speculative_k=3)
        assert answers == alone
        acceptance[name] = target.draft_counts.acceptance_rate
    assert acceptance["head"] > acceptance["untrained"] + 0.25, acceptance
    # one prompt, and a stream; "auto" by default with a head
    assert target.generate(PROMPTS[0], max_new_tokens=24, temperature=0, draft_model=head) == alone[0]
    stream = target.generate(PROMPTS[1], max_new_tokens=24, temperature=0, draft_model=head, stream=True)
    assert "".join(stream) == alone[1]


def test_a_head_refuses_another_target_and_to_generate_alone(checkpoints, llms, tmp_path):
    with pytest.raises(ValueError, match="is a draft head: it drafts only for its target .*target"):
        llms["head"].generate(PROMPTS[0], max_new_tokens=4)
    _, other = tiny_checkpoints.build_pair(tmp_path, seed=7)
    other_llm = LLM.load(str(other), distribute=None)
    other_llm.distribute(accelerator="cpu", precision="32-true")
    with pytest.raises(
        ValueError, match=f"draft head {checkpoints['head']} was trained for the target .*, not for {other}"
    ):
        other_llm.generate(PROMPTS[0], max_new_tokens=4, draft_model=llms["head"])


def test_generate_speculatively_with_the_head_is_the_target_alone(checkpoints):
    options = ("--max_new_tokens", "24", "--temperature", "0", "--precision", "32-true")
    alone = litgpt_in_process.generate(checkpoints["target"], PROMPTS[0], *options)
    run = litgpt_in_process.generate_speculatively(checkpoints["head"], checkpoints["target"], PROMPTS[0], *options)
    assert run.text == alone.text
    assert run.acceptance_rate is not None and run.acceptance_rate > 0


def test_chat_with_the_head_replies_as_the_target_alone(checkpoints):
    options = ("--max_new_tokens", "16", "--temperature", "0", "--precision", "32-true")
    alone, _ = litgpt_in_process.chat(checkpoints["target"], PROMPTS[:2], *options)
    replies, _ = litgpt_in_process.chat(
        checkpoints["target"], PROMPTS[:2], *options, "--draft_model", checkpoints["head"]
    )
    assert replies == alone and len(replies) == 2


def test_a_server_refuses_a_head_for_another_target(checkpoints, tmp_path):
    _, other = tiny_checkpoints.build_pair(tmp_path, seed=7)
    error = litgpt_in_process.refused_at_start(other, "--draft_model", checkpoints["head"], "--accelerator", "cpu")
    assert f"draft head {checkpoints['head']} was trained for the target" in error and str(other) in error


def test_a_server_with_the_head_answers_four_clients_at_once_as_the_target_alone(checkpoints, llms):
    options = ["--openai_spec", "true", "--temperature", "0", "--max_new_tokens", "24", "--accelerator", "cpu"]
    options += ["--precision", "32-true", "--draft_model", str(checkpoints["head"]), "--max_batch_size", "4"]
    expected = [llms["target"].generate(p, max_new_tokens=24, temperature=0) for p in PROMPTS]
    with litgpt_server.serving((checkpoints["target"], options), log_dir=checkpoints["root"]) as (server,):
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="not needed", max_retries=0)

        def ask(prompt):
            messages = [{"role": "user", "content": prompt}]
            return client.chat.completions.create(model="tiny", messages=messages, temperature=0).choices[0]

        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(ask, PROMPTS))
    assert [a.message.content for a in answers] == expected
