"""The package's layers: no module imports one above it, and imports form no cycle.

Each table lists layers bottom to top; a module may import its own layer and
the ones below. The Python half parses every ``import`` under ``python/ringio``
(function-level ones included: a lazy import is still a dependency). The Rust
half parses the ``crate::`` paths of ``src/**/*.rs`` at top-level module
granularity (``src/net/ring.rs`` is module ``net``). docs/architecture.md
describes the layers.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python" / "ringio"

# Module paths relative to the ``ringio`` package, bottom to top. A module
# belongs to the entry naming it or its nearest listed parent package;
# ``__init__`` is ``ringio`` itself. The file objects (``_io``) are layered as
# CPython's ``io`` is: the raw binary file over what binary files share, the
# buffered one over the raw one, text over buffered,
# ``open`` assembling them. ``aio`` and
# ``uring`` are thin Python faces of the native kernel interfaces, which the
# file engines use too (``uring.stat_result``). ``compat`` adapts ringio's
# public API (``ringio.open``) to other libraries' and ``ringio`` never imports it.
PY_LAYERS: list[set[str]] = [
    {"_core"},
    {"_proactor", "_ring_hook"},
    {"aio", "uring"},
    {"_engines"},
    {"_io.base"},
    {"_io.lines", "_io.direct", "_io.positional"},
    {"_io.binary"},
    {"_io.raw"},
    {"_io.buffered"},
    {"_io.text"},
    {"_io.open"},
    {"_io"},
    {"os", "tempfile"},
    {"loop"},
    {"watcher"},
    {"__init__"},
    {"compat"},
    {"bench", "__main__"},
]

# Top-level modules of the crate (``src/x.rs`` or ``src/x/``), bottom to top.
RUST_LAYERS: list[set[str]] = [
    {"sys", "errors", "sync", "pytype"},
    {"buffers"},
    {"ring"},
    {"op", "engine", "aio", "uring", "lines", "fastpath", "started"},
    {"pydriver", "ready", "ready_future", "deferred", "inline_read"},
    {"net", "conn"},
    {"loopcore"},
    {"lib"},
]


def layer_of(module: str, layers: Sequence[set[str]]) -> int:
    """The layer of ``module`` (dotted, relative to the package root)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        for i, layer in enumerate(layers):
            if name in layer:
                return i
    raise LookupError(f"module {module!r} is in no layer: add it to the table")


# --- Python ---------------------------------------------------------------


def python_modules(root: Path) -> dict[str, Path]:
    """Dotted name relative to the package (``__init__`` for the package itself)."""
    mods = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).with_suffix("").parts
        if rel[-1] == "__init__":
            rel = rel[:-1]
        mods[".".join(rel) or "__init__"] = path
    for path in sorted(root.rglob("*.so")):
        mods[path.relative_to(root).parts[0].split(".")[0]] = path
    mods.setdefault("_core", root / "_core.abi3.so")
    return mods


def python_imports(root: Path, package: str = "ringio") -> dict[str, set[str]]:
    """For every module, the package modules it imports (anywhere in its body)."""
    mods = python_modules(root)
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        if path.suffix != ".py":
            continue
        is_pkg = path.name == "__init__.py"
        # The package a relative import starts from, as a list of parts.
        here = [] if name == "__init__" else name.split(".")
        base = here if is_pkg else here[:-1]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[list[str]] = []
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] == package:
                        targets.append(parts[1:])
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    up = node.level - 1
                    if up > len(base):
                        raise ValueError(f"{path}: relative import beyond the package")
                    start = base[: len(base) - up]
                    mod = start + (node.module.split(".") if node.module else [])
                elif node.module and node.module.split(".")[0] == package:
                    mod = node.module.split(".")[1:]
                else:
                    continue
                for alias in node.names:
                    sub = ".".join([*mod, alias.name])
                    # ``from . import x`` names a submodule when there is one.
                    targets.append(sub.split(".") if sub in mods else mod)
            for parts in targets:
                target = ".".join(parts) or "__init__"
                while target not in mods and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


# --- Rust -----------------------------------------------------------------

_CRATE_PATH = re.compile(r"\bcrate::(\{|[A-Za-z_][A-Za-z0-9_]*)")


def _strip_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def _group_heads(src: str, start: int) -> Iterable[str]:
    """The first path segment of each item of the ``{...}`` group opening at ``start``."""
    depth, item, i = 0, "", start
    while i < len(src):
        c = src[i]
        if c == "{":
            depth += 1
            if depth == 1:
                item = ""
                i += 1
                continue
        elif c == "}":
            depth -= 1
            if depth == 0:
                break
        if depth == 1 and c == ",":
            yield item
            item = ""
        elif depth >= 1:
            item += c
        i += 1
    yield item


def rust_imports(src_dir: Path) -> dict[str, set[str]]:
    """For every top-level crate module, the other top-level modules it names."""
    graph: dict[str, set[str]] = {}
    for path in sorted(src_dir.rglob("*.rs")):
        rel = path.relative_to(src_dir).parts
        name = rel[0].removesuffix(".rs")
        src = _strip_comments(path.read_text())
        edges = graph.setdefault(name, set())
        for m in _CRATE_PATH.finditer(src):
            if m.group(1) == "{":
                for item in _group_heads(src, m.start(1)):
                    head = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)", item)
                    if head and head.group(1) != "self":
                        edges.add(head.group(1))
            else:
                edges.add(m.group(1))
        edges.discard(name)
    return graph


# --- the checks ---------------------------------------------------------------


def upward_edges(graph: dict[str, set[str]], layers: Sequence[set[str]]) -> list[str]:
    """``a -> b`` for every import of a module above ``a``'s layer."""
    return [
        f"{a} -> {b}"
        for a, targets in sorted(graph.items())
        for b in sorted(targets)
        if layer_of(b, layers) > layer_of(a, layers)
    ]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def layering_problems(graph: dict[str, set[str]], layers: Sequence[set[str]]) -> list[str]:
    return [
        *(f"upward import {e}" for e in upward_edges(graph, layers)),
        *(f"import cycle {' <-> '.join(c)}" for c in cycles(graph)),
    ]


# --- tests ----------------------------------------------------------------


def test_python_tree_is_layered() -> None:
    graph = python_imports(PACKAGE)
    assert "_engines.kernel" in graph and "loop._loop" in graph  # the walk found the tree
    assert layering_problems(graph, PY_LAYERS) == []


def test_rust_tree_is_layered() -> None:
    graph = rust_imports(ROOT / "src")
    assert "ring" in graph and "loopcore" in graph  # the walk found the crate
    assert layering_problems(graph, RUST_LAYERS) == []


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


FAKE_PY = {
    "ringio/__init__.py": "from .loop import EventLoop\n",
    "ringio/_core/__init__.pyi": "",
    "ringio/_proactor.py": "from ._core import Op\n",
    "ringio/_engines/__init__.py": "from .kernel import KernelEngine\n",
    "ringio/_engines/kernel.py": "from .. import _core\nfrom .._proactor import P\n",
    "ringio/loop/__init__.py": "from ._loop import EventLoop\n",
    "ringio/loop/_loop.py": "from .. import _engines, uring\nimport ringio._core\n",
    "ringio/uring.py": "from ._core import Ring\n",
}


def test_checker_passes_a_layered_fake_package(tmp_path: Path) -> None:
    _write(tmp_path, FAKE_PY)
    graph = python_imports(tmp_path / "ringio")
    assert graph["loop._loop"] == {"_engines", "uring", "_core"}
    assert graph["_engines.kernel"] == {"_core", "_proactor"}
    assert layering_problems(graph, PY_LAYERS) == []


def test_checker_finds_an_upward_function_level_import(tmp_path: Path) -> None:
    _write(tmp_path, {
        **FAKE_PY,
        "ringio/_engines/kernel.py": (
            "from .. import _core\n\ndef f():\n    from ..loop import RingSelector\n"
        ),
    })  # fmt: skip
    graph = python_imports(tmp_path / "ringio")
    assert layering_problems(graph, PY_LAYERS) == [
        "upward import _engines.kernel -> loop",
        "import cycle _engines <-> _engines.kernel <-> loop <-> loop._loop",
    ]


def test_checker_finds_a_cycle_within_a_layer(tmp_path: Path) -> None:
    _write(tmp_path, {
        **FAKE_PY,
        "ringio/os/__init__.py": "",
        "ringio/os/path.py": "def f():\n    import ringio.tempfile\n",
        "ringio/tempfile.py": "from .os import path\n",
    })  # fmt: skip
    graph = python_imports(tmp_path / "ringio")
    assert layering_problems(graph, PY_LAYERS) == ["import cycle os.path <-> tempfile"]


def test_checker_refuses_a_module_in_no_layer(tmp_path: Path) -> None:
    _write(tmp_path, {**FAKE_PY, "ringio/stray.py": "from . import uring\n"})
    with pytest.raises(LookupError, match="stray"):
        layering_problems(python_imports(tmp_path / "ringio"), PY_LAYERS)


def test_rust_checker_reads_use_groups_and_paths(tmp_path: Path) -> None:
    _write(tmp_path, {
        "src/lib.rs": "pub mod op;\npub mod net;\nuse crate::op::Op;\n",
        "src/op.rs": (
            "use crate::{buffers::{BufView, Aligned}, errors::{self, err},\n  sys};\n"
            "// crate::loopcore::X in a comment is no edge\n"
            "fn f() { crate::engine::go(); }\n"
        ),
        "src/net/ring.rs": "use super::x;\nuse crate::op;\n",
        "src/net/mod.rs": "use crate::loopcore::LoopCore;\n",
        "src/loopcore.rs": "use crate::net::ring::Ring;\n",
    })  # fmt: skip
    graph = rust_imports(tmp_path / "src")
    assert graph == {
        "lib": {"op"},
        "op": {"buffers", "errors", "sys", "engine"},
        "net": {"op", "loopcore"},
        "loopcore": {"net"},
    }
    assert layering_problems(graph, RUST_LAYERS) == [
        "upward import net -> loopcore",
        "import cycle loopcore <-> net",
    ]


if __name__ == "__main__":
    for problem in layering_problems(python_imports(PACKAGE), PY_LAYERS):
        print("python:", problem)
    for problem in layering_problems(rust_imports(ROOT / "src"), RUST_LAYERS):
        print("rust:", problem)
