"""Developer tool: edit the patch series with ordinary git.

    python backend/devtree.py materialize [--force]   # build/upstream: "upstream 0.5.13" commit + one commit per patch
    python backend/devtree.py export                  # those commits -> patches/NNNN-*.patch and patches/series

In build/upstream, amend, rebase or add commits as usual; the base commit is tagged ``upstream``.
Run the tests against it without reinstalling: ``PYTHONPATH=build/upstream python -m pytest ...``.
"""

from __future__ import annotations

import argparse
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
    pin = upstream_tree.read_pin(ROOT)
    patches = upstream_tree.read_series(ROOT / "patches")
    if tree.exists():
        if not force:
            raise ForkBuildError(f"{tree} exists; export any work in it first, then rerun with --force to replace it")
        shutil.rmtree(tree)
    tree.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=tree.parent) as tmp:
        upstream_tree.unpack_sdist(upstream_tree.fetch_sdist(pin, sdist), Path(tmp)).rename(tree)
    git("init", "-q", "-b", "main", cwd=tree)
    git("add", "-A", "-f", cwd=tree)
    git(
        "commit",
        "-q",
        "-m",
        f"upstream {pin.version}",
        "-m",
        f"Unpacked {pin.sdist_name}, sha256 {pin.sha256}.",
        cwd=tree,
    )
    git("tag", "upstream", cwd=tree)
    for patch in patches:
        result = git("am", "-q", "--keep-cr", str(patch), cwd=tree, check=False)
        if result.returncode != 0:
            git("am", "--abort", cwd=tree, check=False)
            raise ForkBuildError(f"patch {patch.name} does not apply with git am:\n{result.stderr.strip()}")
    return tree


def export(tree: Path = TREE) -> list[str]:
    """Write ``upstream..HEAD`` of ``tree`` as format-patch files into patches/ and rewrite the series."""
    patches_dir = ROOT / "patches"
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
    (patches_dir / "series").write_text("".join(f"{name}\n" for name in names))
    return names


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
