"""ringio.os.path against os.path on the same tree, on every engine."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from tests.os.reference import At, Tree, same_as_os

import ringio.os.path as rpath

QUERIES = ["exists", "isfile", "isdir", "islink", "ismount"]
STATS = ["getsize", "getmtime", "getatime", "getctime"]

ARGS = [
    At("file"), At("file", "bytes"), At("file", "path"), At("dir"), At("empty"),
    At("link"), At("dirlink"), At("broken"), At("loop"), At("missing"), At("file/x"),
    At("dir/inner"), At(""), "", "rel", "a\0b", b"a\0b", "/", "/proc", "/proc/self",
]


@pytest.mark.parametrize("name", QUERIES + STATS)
async def test_same_as_os_path(engine, tree: Tree, name, monkeypatch):
    monkeypatch.chdir(tree.root)
    for arg in [*ARGS, None, 1.5]:
        await same_as_os(tree, getattr(rpath, name), getattr(os.path, name), arg)


async def test_queries_on_fds(engine, tree: Tree):
    fd = os.open(tree.root / "file", os.O_RDONLY)
    try:
        for name in ["exists", "isfile", "isdir", "getsize", "getmtime"]:
            for arg in [fd, 99999, -1]:
                await same_as_os(tree, getattr(rpath, name), getattr(os.path, name), arg)
    finally:
        os.close(fd)


async def test_samefile_and_sameopenfile(engine, tree: Tree):
    for a, b in [
        (At("file"), At("link")), (At("file"), At("dir/inner")), (At("dir"), At("dirlink")),
        (At("file"), At("missing")), (At("broken"), At("broken")), (At("file"), None),
    ]:
        await same_as_os(tree, rpath.samefile, os.path.samefile, a, b)
    f1 = os.open(tree.root / "file", os.O_RDONLY)
    f2 = os.open(tree.root / "link", os.O_RDONLY)
    f3 = os.open(tree.root / "dir" / "inner", os.O_RDONLY)
    try:
        assert await rpath.sameopenfile(f1, f2) is os.path.sameopenfile(f1, f2) is True
        assert await rpath.sameopenfile(f1, f3) is os.path.sameopenfile(f1, f3) is False
        for a, b in [(f1, 99999), ("x", f1), (None, f1)]:
            await same_as_os(tree, rpath.sameopenfile, os.path.sameopenfile, a, b)
    finally:
        for fd in (f1, f2, f3):
            os.close(fd)


async def test_abspath(engine, tree: Tree, monkeypatch):
    monkeypatch.chdir(tree.root / "dir")
    for arg in ["x", "../y/./z", "", ".", "/a/../b//c", b"rel", b"/abs/./x", Path("p"), "a\0b"]:
        assert await rpath.abspath(arg) == os.path.abspath(arg)
    with pytest.raises(TypeError):
        await rpath.abspath(None)


async def test_ismount_of_mount_points(engine):
    assert await rpath.ismount("/") is True
    assert await rpath.ismount("/proc") is os.path.ismount("/proc")
    assert await rpath.ismount(b"/") is True


async def test_getsize_tracks_writes(engine, tmp_path: Path):
    p = tmp_path / "grow"
    p.write_bytes(b"")
    sizes = []
    for n in (0, 10, 4096):
        p.write_bytes(b"x" * n)
        sizes.append(await rpath.getsize(p))
    assert sizes == [0, 10, 4096]
    results = await asyncio.gather(*(rpath.exists(tmp_path / f"n{i}") for i in range(50)))
    assert results == [False] * 50
