"""The patch series as upstream receives it: git am on the release tree, upstream's lint, one subject each."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import devtree
import upstream_tree
from upstream_tree import git

from .conftest import ROOT

PATCHES = upstream_tree.read_series(ROOT / "patches")


@pytest.fixture(scope="module")
def am_tree(upstream_sdist, tmp_path_factory):
    """Upstream 0.5.13 committed into a throwaway repository, then `git am` of the whole series (devtree's way)."""
    return devtree.materialize(tmp_path_factory.mktemp("am") / "tree", sdist=upstream_sdist)


def test_series_applies_with_git_am(am_tree):
    subjects = git("log", "--reverse", "--format=%s", "upstream..HEAD", cwd=am_tree).stdout.splitlines()
    assert len(subjects) == len(PATCHES)
    assert git("status", "--porcelain", cwd=am_tree).stdout == ""


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name[:4])
def test_patch_is_a_reviewable_commit(patch):
    text = patch.read_text()
    assert re.search(r"^From: .+", text, re.MULTILINE)
    subject = re.search(r"^Subject: \[PATCH\] (.+)$", text, re.MULTILINE)
    assert subject and not subject.group(1).endswith(".")
    body = text.split("\n\n", 1)[1].split("\n---\n", 1)[0]
    assert len(body.split()) >= 30, "the message must say the bug, the fix and how it was verified"


def test_changed_python_passes_upstreams_ruff(am_tree):
    changed = git("diff", "--name-only", "--diff-filter=AM", "upstream", "HEAD", "--", "*.py", cwd=am_tree)
    files = changed.stdout.split()
    assert files
    # ruff picks up upstream's own configuration from the tree's pyproject.toml
    for args in (["check"], ["format", "--check"]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *args, *files], cwd=am_tree, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stdout + result.stderr
