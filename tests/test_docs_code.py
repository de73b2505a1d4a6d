"""Every Python code block of README.md and docs/*.md runs as written.

A block is a complete program: it runs in a fresh interpreter, in an empty
folder, and must exit 0 within its time limit. A block that cannot stand alone
(a method body, a loop without its server, an excerpt of a larger program) is
marked with the HTML comment ``<!-- fragment -->`` on the line before its fence:
it is only compiled (top-level ``await`` allowed), so a syntax error still fails.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```python\s*$")
FRAGMENT = "<!-- fragment -->"


def code_blocks() -> list[tuple[str, int, str, bool]]:
    """(file, line of the fence, code, is_fragment) for every Python block."""
    blocks = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            if FENCE.match(lines[i]):
                start = i
                fragment = i > 0 and lines[i - 1].strip() == FRAGMENT
                i += 1
                body = []
                while i < len(lines) and not lines[i].startswith("```"):
                    body.append(lines[i])
                    i += 1
                blocks.append((path.relative_to(ROOT).as_posix(), start + 1,
                               "\n".join(body) + "\n", fragment))  # fmt: skip
            i += 1
    return blocks


BLOCKS = code_blocks()


def test_the_docs_have_python_blocks() -> None:
    assert len(BLOCKS) >= 10
    assert sum(not fragment for *_, fragment in BLOCKS) >= 5  # most are whole programs


@pytest.mark.parametrize(
    ("where", "code", "fragment"),
    [(f"{f}:{line}", code, frag) for f, line, code, frag in BLOCKS],
    ids=[f"{f}:{line}" for f, line, _, _ in BLOCKS],
)
def test_code_block_runs(where: str, code: str, fragment: bool, tmp_path: Path) -> None:
    if fragment:
        compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        return
    proc = subprocess.run(
        [sys.executable, "-X", "dev", "-c", code],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, f"{where} failed:\n{proc.stderr[-3000:]}"


def test_api_reference_names_every_public_name() -> None:
    import ringio

    api = (ROOT / "docs" / "api.md").read_text()
    documented = set(re.findall(r"^::: (\S+)", api, re.M))
    documented |= {
        f"ringio.{m}" for m in re.findall(r"members: \[([^\]]*)\]", api) for m in m.split(", ")
    }
    modules = {"aio", "uring", "tempfile", "watcher"}
    missing = [
        name for name in ringio.__all__
        if f"ringio.{name}" not in documented and name not in modules
    ]  # fmt: skip
    assert not missing, f"docs/api.md lacks {missing}"
    for module in ("aio", "uring", "os", "os.path", "tempfile", "compat.aiofiles",
                   "compat.caio", "compat.linux_aio"):  # fmt: skip
        assert f"ringio.{module}" in documented, module


def test_every_docs_page_is_in_the_site_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [p.name for p in (ROOT / "docs").glob("*.md")]
    assert [p for p in pages if f": {p}" not in nav] == []
