"""Developer tool: edit the patch series with ordinary git.

    python backend/devtree.py materialize [--force]   # build/upstream: "upstream 0.5.13" commit + one commit per patch
    python backend/devtree.py export                  # those commits -> patches/NNNN-*.patch and patches/series

In build/upstream, amend, rebase or add commits as usual; the base commit is tagged ``upstream``.
Run the tests against it without reinstalling: ``PYTHONPATH=build/upstream python -m pytest ...``.
"""

from __future__ import annotations

import argparse
import email
import re
import shutil
import sys
import tempfile
from pathlib import Path

import upstream_tree
from upstream_tree import ForkBuildError, git

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "upstream"


def materialize(tree: Path = TREE, sdist: str | None = None, force: bool = False) -> Path:
    """Create ``tree`` afresh as a git repository holding upstream and the patch series as commits."""
    if tree.exists():
        if not force:
            raise ForkBuildError(f"{tree} exists; export any work in it first, then rerun with --force to replace it")
        shutil.rmtree(tree)
    tree.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=tree.parent) as tmp:
        patched, _ = upstream_tree.patched_tree(ROOT, Path(tmp), sdist)
        patched.rename(tree)
    return tree


def export(tree: Path = TREE) -> list[str]:
    """Write ``upstream..HEAD`` of ``tree`` as format-patch files into patches/ and rewrite the series, keeping its
    topic comments where they were."""
    patches_dir = ROOT / "patches"
    series_lines = (patches_dir / "series").read_text().splitlines() if (patches_dir / "series").exists() else []
    for old in patches_dir.glob("*.patch"):
        old.unlink()
    git(
        "format-patch",
        "--no-numbered",
        "--zero-commit",
        "--no-signature",
        "--quiet",
        "-o",
        str(patches_dir),
        "upstream..HEAD",
        cwd=tree,
    )
    names = sorted(p.name for p in patches_dir.glob("*.patch"))
    (patches_dir / "series").write_text("".join(f"{line}\n" for line in with_topics(names, series_lines)))
    readme = patches_dir / "README.md"
    if readme.exists():
        head, rest = readme.read_text().split(TABLE_START, 1)
        readme.write_text(f"{head}{TABLE_START}\n{patch_table(patches_dir)}{TABLE_END}{rest.split(TABLE_END, 1)[1]}")
    return names


TABLE_START, TABLE_END = "<!-- patch table: python backend/devtree.py export -->", "<!-- end of patch table -->"


def patch_table(patches_dir: Path) -> str:
    """The series by topic (its comment lines), each patch with its subject, the lines it adds and removes, and the
    upstream issue it fixes."""
    lines = []
    for line in (patches_dir / "series").read_text().splitlines():
        if line.startswith("#"):
            lines += ["", f"### {line.lstrip('# ')}", "", "| patch | subject | lines | fixes |", "|---|---|---|---|"]
        elif line.strip():
            text = (patches_dir / line).read_text()
            subject = " ".join(email.message_from_string(text)["Subject"].split()).removeprefix("[PATCH] ")
            stat = git("apply", "--numstat", str((patches_dir / line).resolve()), cwd=patches_dir).stdout.splitlines()
            added, removed = (sum(int(row.split()[i]) for row in stat) for i in (0, 1))
            issue = re.search(r"^Fixes: (https://github.com/Lightning-AI/litgpt/issues/(\d+))", text, re.MULTILINE)
            fixes = f"[#{issue.group(2)}]({issue.group(1)})" if issue else ""
            lines.append(f"| [{line[:4]}]({line}) | {subject} | +{added} −{removed} | {fixes} |")
    return "\n".join(lines).lstrip("\n") + "\n"


def with_topics(names: list[str], old_lines: list[str]) -> list[str]:
    """The series' lines: `names`, with the comment lines (one per topic) of the old series before the patch of the
    same position."""
    comments, position = {}, 0
    for line in old_lines:
        if line.startswith("#"):
            comments.setdefault(position, []).append(line)
        elif line.strip():
            position += 1
    return [line for i, name in enumerate(names) for line in [*comments.get(i, []), name]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["materialize", "export"])
    parser.add_argument("--tree", type=Path, default=TREE, help=f"where the patched tree lives (default: {TREE})")
    parser.add_argument("--force", action="store_true", help="materialize: replace an existing tree")
    parser.add_argument("--sdist", help=f"a local copy of the upstream sdist (default: ${upstream_tree.SDIST_ENV})")
    args = parser.parse_args(argv)
    try:
        if args.command == "materialize":
            print(f"patched upstream tree at {materialize(args.tree, args.sdist, args.force)}")
        else:
            print("\n".join(f"patches/{name}" for name in export(args.tree)))
    except ForkBuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
