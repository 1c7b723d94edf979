"""The patched `litgpt/generate/` and `litgpt/deploy/` packages as a maintainer reads them: files of a readable size,
no module that imports one that imports it back (imports inside functions count too), and two generation drivers that
share the modules below them but not each other."""

from __future__ import annotations

import ast
from pathlib import Path

import litgpt.deploy
import litgpt.generate
import pytest

# package -> its modules, and the most lines of one
PACKAGES = {
    package.__name__.split(".")[1]: (
        {path.stem: path for path in sorted(Path(package.__file__).parent.glob("*.py")) if path.stem != "__init__"},
        500,
    )
    for package in (litgpt.generate, litgpt.deploy)
}
# upstream's modules that the fork leaves longer than that, and the most lines it may make them
UPSTREAM_LONGER = {
    ("generate", "base"): 580,  # upstream's is 559 lines
    # upstream's is 477 lines: the single-request driver of `litgpt generate_speculatively`, in upstream's shape (its
    # tests patch the module's functions), with the lookup, speculative_k "auto" and the draft head
    ("generate", "speculative_decoding"): 650,
}


def package_imports(path: Path, package: str) -> set[str]:
    """The modules of `litgpt.<package>` that the module at `path` imports, at its top or inside a function."""
    found = set()
    prefix = f"litgpt.{package}"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == prefix:
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(f"{prefix}."):
            found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith(f"{prefix}.")}
    return found & set(PACKAGES[package][0])


def test_imports_are_read_from_both_forms_of_import(tmp_path):
    source = "import litgpt.generate.base\nfrom litgpt.generate import tp\n"
    source += "def f():\n    from litgpt.generate.full import x\n"
    (tmp_path / "m.py").write_text(source)
    assert package_imports(tmp_path / "m.py", "generate") == {"base", "tp", "full"}


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_module_of_the_package_imports_itself_back(package):
    modules, _ = PACKAGES[package]
    graph = {name: package_imports(path, package) - {name} for name, path in modules.items()}

    def cycle_from(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return path[path.index(name) :] + [name]
        for imported in sorted(graph[name]):
            if found := cycle_from(imported, path + [name]):
                return found
        return None

    cycles = [cycle for name in graph if (cycle := cycle_from(name, []))]
    assert not cycles, " -> ".join(cycles[0])


def test_the_base_module_imports_nothing_of_speculative_decoding():
    assert package_imports(PACKAGES["generate"][0]["base"], "generate") == set()


def test_neither_generation_driver_imports_the_other():
    modules, _ = PACKAGES["generate"]
    assert "continuous_batching" not in package_imports(modules["speculative_decoding"], "generate")
    assert "speculative_decoding" not in package_imports(modules["continuous_batching"], "generate")


@pytest.mark.parametrize(("package", "name"), [(p, name) for p, (modules, _) in PACKAGES.items() for name in modules])
def test_each_file_is_of_a_readable_size(package, name):
    modules, max_lines = PACKAGES[package]
    max_lines = UPSTREAM_LONGER.get((package, name), max_lines)
    lines = len(modules[name].read_text().splitlines())
    assert lines <= max_lines, f"litgpt/{package}/{name}.py has {lines} lines: split it by concern"
