"""The table of docs/pairs.md, from the installed LitGPT's own model configs.

    python -m tools.vocabulary_table            # print the table
    python -m tools.vocabulary_table --write    # replace it in docs/pairs.md (rerun when the pin moves)

Configs are grouped by family (the Hugging Face organisation) and vocab_size: candidates for a shared tokenizer.
Within a group, models padded to different sizes crash LitGPT 0.5.13's speculative decoding and run on the fork.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

from litgpt.config import Config, configs

PAIRS = Path(__file__).resolve().parent.parent / "docs" / "pairs.md"
START, END = "<!-- vocabulary table: python -m tools.vocabulary_table --write -->", "<!-- end of vocabulary table -->"


def groups() -> dict[tuple[str, int], dict[int, list[str]]]:
    """(organisation, vocab_size) -> padded_vocab_size -> model names, in LitGPT's config order."""
    result: dict = defaultdict(lambda: defaultdict(list))
    for config in configs:
        resolved = Config(**config)
        result[(config["hf_config"]["org"], resolved.vocab_size)][resolved.padded_vocab_size].append(config["name"])
    return result


def table() -> str:
    lines = [
        "| family | vocab_size | padded_vocab_size | models |",
        "|---|---|---|---|",
    ]
    same = 0
    for (org, vocab_size), padded in sorted(groups().items()):
        if len(padded) == 1:
            same += 1
            continue
        for i, (size, names) in enumerate(sorted(padded.items())):
            lines.append(f"| {org if i == 0 else ''} | {vocab_size if i == 0 else ''} | {size} | {', '.join(names)} |")
    lines += [
        "",
        f"A draft from one row and a target from another row of the same family crash on 0.5.13 and run on the fork."
        f" In the other {same} families of LitGPT's {len(configs)} configs, every model with the same vocab_size"
        " pads it to the same size.",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"replace the table in {PAIRS.name}")
    args = parser.parse_args()
    if not args.write:
        print(table())
        return 0
    text = PAIRS.read_text()
    head, start, rest = text.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        print(f"error: {PAIRS} has no {START!r} ... {END!r} block", file=sys.stderr)
        return 1
    PAIRS.write_text(f"{head}{START}\n{table()}\n{END}{tail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
