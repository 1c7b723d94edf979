"""Turn the pinned upstream sdist plus ``patches/`` into a patched source tree.

Shared by the PEP 517 backend (``fork_backend``) and the developer tool (``devtree``), so that a wheel
and a developer's tree are always made by the same steps: fetch, verify, unpack, apply the series.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SDIST_ENV = "LITGPT_UPSTREAM_SDIST"
CACHE_ENV = "LITGPT_FORK_CACHE"


class ForkBuildError(RuntimeError):
    """A build step failed for a reason the user can act on; the message says which and how."""


@dataclass(frozen=True)
class Pin:
    """The upstream release we build on, as declared in ``[tool.litgpt-fork]`` of pyproject.toml."""

    name: str
    version: str
    sha256: str
    local_label: str

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"

    @property
    def sdist_name(self) -> str:
        return f"{self.name}-{self.version}.tar.gz"


def read_pin(root: Path) -> Pin:
    table = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["litgpt-fork"]
    name, version = table["upstream"].split("==")
    return Pin(name=name, version=version, sha256=table["sha256"], local_label=table["local-label"])


def read_series(patches_dir: Path) -> list[Path]:
    """The patches named in ``patches/series``, in order (blank lines and ``#`` comments skipped)."""
    names = [line.split()[0] for line in (patches_dir / "series").read_text().splitlines() if line.strip()]
    patches = [patches_dir / name for name in names if not name.startswith("#")]
    missing = [p.name for p in patches if not p.is_file()]
    if missing:
        raise ForkBuildError(f"patches/series names patches that do not exist: {', '.join(missing)}")
    return patches


def local_version(pin: Pin, patches: list[Path]) -> str:
    """PEP 440 local version, e.g. ``0.5.13+fork.1.g1a2b3c4d``: patch count and a digest of their content."""
    digest = hashlib.sha256()
    for patch in patches:
        digest.update(patch.name.encode() + b"\0" + patch.read_bytes())
    return f"{pin.version}+{pin.local_label}.{len(patches)}.g{digest.hexdigest()[:8]}"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_sdist(pin: Pin, sdist: Path) -> Path:
    if not sdist.is_file():
        raise ForkBuildError(f"upstream sdist {sdist} does not exist (from {SDIST_ENV} or upstream-sdist)")
    actual = sha256_of(sdist)
    if actual != pin.sha256:
        raise ForkBuildError(
            f"sha256 mismatch for {sdist}: expected {pin.sha256} (pinned in pyproject.toml for {pin.requirement}),"
            f" got {actual}. The file is corrupt or is not the published {pin.sdist_name}; delete it and retry."
        )
    return sdist


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "litgpt-fork"


def fetch_sdist(pin: Pin, local: str | os.PathLike | None = None) -> Path:
    """Return a verified copy of the upstream sdist: ``local`` if given, else the cache, else ``pip download``."""
    local = local or os.environ.get(SDIST_ENV)
    if local:
        return verify_sdist(pin, Path(local))
    cached = cache_dir() / pin.sdist_name
    if cached.is_file() and sha256_of(cached) == pin.sha256:
        return cached
    cached.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--no-build-isolation"]
    # inside a PEP 517 hook, pyproject-hooks' variables would point pip's own metadata build at our backend-path
    env = {k: v for k, v in os.environ.items() if not k.startswith(("_PYPROJECT_HOOKS_", "PEP517_"))}
    result = subprocess.run([*cmd, "-d", str(cached.parent), pin.requirement], capture_output=True, text=True, env=env)
    if result.returncode != 0 or not cached.is_file():
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-5:])
        raise ForkBuildError(
            f"could not download {pin.requirement} with pip (exit {result.returncode}):\n{tail}\n"
            f"To build offline, get the sdist on a connected machine with"
            f" `pip download --no-deps --no-binary :all: {pin.requirement}` and point the build at it:"
            f" {SDIST_ENV}=/path/to/{pin.sdist_name} (or --config-settings upstream-sdist=/path/to/{pin.sdist_name})."
        )
    return verify_sdist(pin, cached)


def unpack_sdist(sdist: Path, dest: Path) -> Path:
    """Unpack into ``dest`` and return the tree root (the sdist's single top-level folder)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as tar:
        # the "data" filter refuses links and paths outside dest; Pythons before 3.10.12/3.11.4 lack filters
        tar.extractall(dest, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (top,) = dest.iterdir()
    return top


def git(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    """Run git in ``cwd`` only: never let it find an enclosing repository (like this one)."""
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(Path(cwd).resolve().parent)}
    for key, value in (("NAME", "litgpt-fork"), ("EMAIL", "litgpt-fork@localhost")):
        env.setdefault(f"GIT_COMMITTER_{key}", value)
        env.setdefault(f"GIT_AUTHOR_{key}", value)
    result = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise ForkBuildError(f"git {' '.join(args)} failed in {cwd}:\n{result.stderr.strip()}")
    return result


def apply_series(tree: Path, patches: list[Path], pin: Pin) -> None:
    """Commit the unpacked upstream tree (tagged ``upstream``) in a repository of its own, then apply each patch with
    ``git am``, one commit each, as upstream would take them; a patch that does not apply is named with the file."""
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
        result = git("am", "-q", "--keep-cr", str(patch.resolve()), cwd=tree, check=False)
        if result.returncode != 0:
            git("am", "--abort", cwd=tree, check=False)
            raise ForkBuildError(f"patch {patch.name} does not apply with git am:\n{result.stderr.strip()}")


def patched_tree(root: Path, dest: Path, sdist: str | os.PathLike | None = None) -> tuple[Path, str]:
    """Fetch, verify, unpack and patch into ``dest``; return the tree and the fork's version."""
    pin = read_pin(root)
    patches = read_series(root / "patches")
    tree = unpack_sdist(fetch_sdist(pin, sdist), dest)
    apply_series(tree, patches, pin)
    return tree, local_version(pin, patches)


def set_version(tree: Path, old: str, new: str) -> None:
    """Stamp the fork's local version into upstream's pyproject.toml (build copy only, never a patch)."""
    pyproject = tree / "pyproject.toml"
    text = pyproject.read_text()
    line = f'version = "{old}"'
    if text.count(line) != 1:
        raise ForkBuildError(f"cannot find {line!r} in upstream's pyproject.toml")
    pyproject.write_text(text.replace(line, f'version = "{new}"'))
