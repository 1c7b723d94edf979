"""Run upstream's test modules that run offline (`make upstream-tests`) at the end of every topic of the patch series.

    python backend/topic_ends.py              # every topic's end, from patches/ as committed
    python backend/topic_ends.py --last 2     # the last two topics' ends only
    python backend/topic_ends.py --ends 26 27 # the topics that end with patches 0026 and 0027

Upstream can take any prefix of the series, topic by topic: at each topic's end, all of its test modules must pass as
they stand in the tree then. The series is applied to upstream's sdist in build/topic-ends/tree (as devtree does), each
topic's last commit checked out in turn and its tests run against its own code (PYTHONPATH). Prints a line per topic
with pytest's counts; exits 1 if a topic's tests failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import devtree
from upstream_tree import git

ROOT = Path(__file__).resolve().parent.parent


def topic_ends(series: list[str]) -> list[tuple[str, int]]:
    """The topics of `series` (the lines of patches/series), each with the number of patches up to its end."""
    topics, count = [], 0
    for line in series:
        if line.startswith("#"):
            topics.append([line.lstrip("# "), count])
        elif line.strip():
            count += 1
            topics[-1][1] = count
    return [(name, end) for name, end in topics]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--last", type=int, default=0, help="only the last N topics (default: all)")
    parser.add_argument("--ends", type=int, nargs="+", help="only the topics that end with these patches, by number")
    args = parser.parse_args(argv)
    tree = devtree.materialize(ROOT / "build" / "topic-ends" / "tree", force=True)
    commits = git("rev-list", "--reverse", "upstream..HEAD", cwd=tree).stdout.split()
    ends = topic_ends((ROOT / "patches" / "series").read_text().splitlines())
    failed = False
    ends = ends[-args.last :] if args.last else ends
    for name, end in [(name, end) for name, end in ends if args.ends is None or end in args.ends]:
        git("checkout", "--quiet", commits[end - 1], cwd=tree)
        result = subprocess.run(
            [
                "make",
                "--no-print-directory",
                "upstream-tests",
                f"TREE={tree.relative_to(ROOT)}",
                f"PYTHON={sys.executable}",
            ],
            cwd=ROOT,
            env=os.environ | {"PYTHONPATH": str(tree)},
            capture_output=True,
            text=True,
        )
        lines = [
            line for line in result.stdout.splitlines() if " in " in line and ("passed" in line or "failed" in line)
        ]
        failed |= result.returncode != 0
        counts = lines[-1].strip("= ") if lines else "?"
        print(f"{end:04d} {'ok  ' if result.returncode == 0 else 'FAIL'} {counts}  {name}", flush=True)
        if result.returncode != 0:
            print(result.stdout[-3000:], result.stderr[-2000:], sep="\n")
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
