"""The patched `litgpt/generate/` package as a maintainer reads it: files of a readable size, and no module that imports
one that imports it back (imports inside functions count too)."""

from __future__ import annotations

import ast
from pathlib import Path

import litgpt.generate
import pytest

PACKAGE = Path(litgpt.generate.__file__).parent
MODULES = {path.stem: path for path in sorted(PACKAGE.glob("*.py")) if path.stem != "__init__"}
MAX_LINES = 700


def generate_imports(path: Path) -> set[str]:
    """The modules of `litgpt.generate` that the module at `path` imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "litgpt.generate":
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("litgpt.generate."):
            found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("litgpt.generate.")}
    return found & set(MODULES)


def test_generate_imports_are_read_from_both_forms_of_import(tmp_path):
    source = "import litgpt.generate.base\nfrom litgpt.generate import tp\n"
    source += "def f():\n    from litgpt.generate.full import x\n"
    (tmp_path / "m.py").write_text(source)
    assert generate_imports(tmp_path / "m.py") == {"base", "tp", "full"}


def test_no_module_of_the_generate_package_imports_itself_back():
    graph = {name: generate_imports(path) - {name} for name, path in MODULES.items()}

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
    assert generate_imports(MODULES["base"]) == set()


@pytest.mark.parametrize("name", sorted(MODULES))
def test_each_file_is_of_a_readable_size(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"litgpt/generate/{name}.py has {lines} lines: split it by concern"
