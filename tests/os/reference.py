"""ringio.os against the os module on real files, on every engine.

Read-only calls are compared on one tree (same result, or same exception type,
errno and filenames); calls that change the tree run on two identical trees, os on
one and ringio on the other, and both the outcomes and the trees after are compared.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STAT_FIELDS = (
    "st_mode", "st_ino", "st_dev", "st_nlink", "st_uid", "st_gid", "st_size",
    "st_mtime_ns", "st_ctime_ns", "st_blksize", "st_blocks", "st_rdev",
)


def stat_fields(st: os.stat_result) -> tuple[Any, ...]:
    return tuple(getattr(st, f) for f in STAT_FIELDS)


def make_tree(root: Path) -> Path:
    """file, dir/inner, empty/, and symlinks: to the file, to dir, broken, a loop."""
    root.mkdir()
    (root / "file").write_bytes(b"hello")
    (root / "dir").mkdir()
    (root / "dir" / "inner").write_bytes(b"x" * 100)
    (root / "empty").mkdir()
    os.symlink("file", root / "link")
    os.symlink("dir", root / "dirlink")
    os.symlink("missing", root / "broken")
    os.symlink("loop", root / "loop")
    return root


def snapshot(root: Path) -> list[tuple[str, str, Any]]:
    """What a tree holds: each entry's kind, size or link target, and mode."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out.append((rel, "link", os.readlink(p)))
            elif os.path.isdir(p):
                out.append((rel, "dir", oct(st.st_mode)))
            else:
                out.append((rel, "file", (st.st_size, st.st_nlink)))
    return sorted(out)


@dataclass(frozen=True)
class At:
    """A path under the tree's root, given to the call as str, bytes or Path."""

    rel: str
    kind: str = "str"

    def under(self, root: Path) -> Any:
        p = root / self.rel if self.rel else root
        return {"str": str(p), "bytes": os.fsencode(p), "path": p}[self.kind]


class DirFd:
    """Stands for an fd open on the tree's root (for dir_fd=)."""


DIR_FD = DirFd()


def outcome_of_error(e: BaseException, root: Path) -> tuple[Any, ...]:
    def rel(name: Any) -> Any:
        if isinstance(name, bytes):
            return name.replace(os.fsencode(root), b"<root>")
        if isinstance(name, str):
            return name.replace(str(root), "<root>")
        return name

    return (
        "raised", type(e), getattr(e, "errno", None), rel(getattr(e, "filename", None)),
        rel(getattr(e, "filename2", None)),
    )


def normalise(value: Any, root: Path) -> Any:
    if isinstance(value, os.stat_result):
        return ("stat", stat_fields(value))
    if isinstance(value, str):
        return value.replace(str(root), "<root>")
    if isinstance(value, bytes):
        return value.replace(os.fsencode(root), b"<root>")
    return value


@dataclass
class Tree:
    root: Path
    fd: int

    def args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple, dict]:
        def conv(a: Any) -> Any:
            if isinstance(a, At):
                return a.under(self.root)
            if a is DIR_FD:
                return self.fd
            return a

        return tuple(conv(a) for a in args), {k: conv(v) for k, v in kwargs.items()}

    def call(self, func: Callable, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        a, kw = self.args(args, kwargs)
        try:
            return ("returned", normalise(func(*a, **kw), self.root))
        except Exception as e:
            return outcome_of_error(e, self.root)

    async def acall(self, func: Callable[..., Awaitable], *args: Any, **kwargs: Any) -> tuple:
        a, kw = self.args(args, kwargs)
        try:
            return ("returned", normalise(await func(*a, **kw), self.root))
        except Exception as e:
            return outcome_of_error(e, self.root)


def open_tree(root: Path) -> Tree:
    return Tree(make_tree(root), os.open(root, os.O_RDONLY | os.O_DIRECTORY))


async def same_as_os(
    tree: Tree, ours: Callable[..., Awaitable], theirs: Callable, *args: Any, **kwargs: Any
) -> tuple[Any, ...]:
    """Runs both on the one tree; asserts the same outcome and returns it."""
    expected = tree.call(theirs, *args, **kwargs)
    got = await tree.acall(ours, *args, **kwargs)
    assert got == expected, f"{ours.__name__}{args}{kwargs}"
    return got


async def same_change_as_os(
    twins: tuple[Tree, Tree], ours: Callable[..., Awaitable], theirs: Callable,
    *args: Any, **kwargs: Any,
) -> tuple[Any, ...]:
    """Runs os on one tree and ringio on its twin; asserts the same outcome and the
    same trees after, and returns the outcome."""
    ref, got = twins
    expected = ref.call(theirs, *args, **kwargs)
    outcome = await got.acall(ours, *args, **kwargs)
    assert outcome == expected, f"{ours.__name__}{args}{kwargs}"
    assert snapshot(got.root) == snapshot(ref.root)
    return outcome
