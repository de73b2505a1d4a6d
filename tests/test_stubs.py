"""The native module's stubs name what the module has, submodule by submodule."""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import pytest

import ringio._core

STUBS = Path(ringio.__file__).parent / "_core"
SUBMODULES = ["uring", "aio", "loop", "net"]


def stub_names(path: Path) -> set[str]:
    """Names a stub file defines (not those it imports)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def runtime_names(module: types.ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("__") and not isinstance(value, types.ModuleType)
    }


# Type aliases the stubs define for annotations only.
STUB_ONLY = {"FdLike", "PathLike", "_T"}


@pytest.mark.parametrize("name", ["__init__", *SUBMODULES])
def test_each_stub_names_exactly_what_its_module_has(name: str) -> None:
    module = ringio._core if name == "__init__" else importlib.import_module(f"ringio._core.{name}")
    stubbed = stub_names(STUBS / f"{name}.pyi") - STUB_ONLY
    present = runtime_names(module)
    assert stubbed - present == set(), "stubbed but not in the module"
    assert present - stubbed == set(), "in the module but not stubbed"


@pytest.mark.parametrize("name", SUBMODULES)
def test_submodules_import_by_their_dotted_name(name: str) -> None:
    module = importlib.import_module(f"ringio._core.{name}")
    assert getattr(ringio._core, name) is module
    assert module.__name__ == f"ringio._core.{name}"
    classes = [
        v for v in vars(module).values()
        if isinstance(v, type) and v.__module__.startswith("ringio")
    ]  # fmt: skip
    assert classes, "no class of ringio's in the submodule"
    assert all(c.__module__ == module.__name__ for c in classes), [c.__module__ for c in classes]
