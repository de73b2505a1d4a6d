"""ringio.os: same results, exceptions and filenames as os, on every engine."""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import threading
from pathlib import Path

import pytest
from tests.os.reference import (
    DIR_FD,
    At,
    Tree,
    same_as_os,
    same_change_as_os,
    snapshot,
    stat_fields,
)

import ringio.os as ros

NAMES = [
    "stat", "statvfs", "sendfile", "rename", "renames", "replace", "remove", "unlink",
    "mkdir", "makedirs", "rmdir", "removedirs", "link", "symlink", "readlink", "listdir",
    "scandir", "access", "getcwd",
]


def _os_signature(fn):
    try:
        return inspect.signature(fn)
    except ValueError:
        # 3.14: os.link's text signature has a default that is an expression,
        # follow_symlinks=(os.name != 'nt'), which inspect refuses: evaluated here.
        # "($module, /, src, ...)": the module is the bound first argument.
        params = re.sub(r"^\(\$module,\s*(/,\s*)?", "(", fn.__text_signature__)
        ns: dict = {}
        exec(f"def f{params}: pass", {"os": os}, ns)
        return inspect.signature(ns["f"])


def test_surface_matches_os_and_aiofiles():
    """Every aiofiles.os name, with os's parameters (plus aiofiles' loop/executor)."""
    for name in NAMES:
        ours = inspect.signature(getattr(ros, name)).parameters
        theirs = _os_signature(getattr(os, name)).parameters
        assert list(ours)[: len(theirs)] == list(theirs), name
        for p in theirs.values():
            assert ours[p.name].kind == p.kind, (name, p.name)
            assert ours[p.name].default == p.default, (name, p.name)
        assert set(ours) - set(theirs) == {"loop", "executor"}, name
    assert ros.path.__name__ == "ringio.os.path"
    aiofiles_os = pytest.importorskip("aiofiles.os", reason="aiofiles not installed")
    assert set(aiofiles_os.__all__) <= set(ros.__all__)
    assert set(aiofiles_os.path.__all__) <= set(ros.path.__all__)


# -- stat ------------------------------------------------------------------------------

STAT_CASES = [
    ((At("file"),), {}),
    ((At("file", "bytes"),), {}),
    ((At("file", "path"),), {}),
    ((At("dir"),), {}),
    ((At("link"),), {}),
    ((At("link"),), {"follow_symlinks": False}),
    ((At("dirlink"),), {}),
    ((At("broken"),), {}),
    ((At("broken"),), {"follow_symlinks": False}),
    ((At("loop"),), {}),
    ((At("missing"),), {}),
    ((At("file/x"),), {}),
    (("",), {}),
    ((b"",), {}),
    (("file",), {"dir_fd": DIR_FD}),
    (("link",), {"dir_fd": DIR_FD, "follow_symlinks": False}),
    (("missing",), {"dir_fd": DIR_FD}),
    ((At("file"),), {"dir_fd": DIR_FD}),  # absolute: dir_fd ignored
    (("file",), {"dir_fd": 99999}),
    ((99999,), {}),
    ((-1,), {}),
    ((DIR_FD,), {}),
    ((DIR_FD,), {"dir_fd": DIR_FD}),
    ((1.5,), {}),
    ((None,), {}),
    (("a\0b",), {}),
    ((At("file"),), {"dir_fd": "3"}),
]


async def test_stat(engine, tree: Tree):
    for args, kwargs in STAT_CASES:
        await same_as_os(tree, ros.stat, os.stat, *args, **kwargs)


async def test_stat_of_an_open_file(engine, tree: Tree):
    fd = os.open(tree.root / "dir" / "inner", os.O_RDONLY)
    try:
        assert stat_fields(await ros.stat(fd)) == stat_fields(os.stat(fd))
    finally:
        os.close(fd)


async def test_stat_result_has_float_and_ns_times(engine, tree: Tree):
    st, ref = await ros.stat(tree.root / "file"), os.stat(tree.root / "file")
    assert st.st_mtime_ns == ref.st_mtime_ns and st.st_atime_ns == ref.st_atime_ns
    assert isinstance(st.st_mtime, float) and st.st_mtime == pytest.approx(ref.st_mtime)
    assert st[8] == ref[8]  # the int time of the tuple form


# -- mkdir, makedirs --------------------------------------------------------------------


MKDIR_CASES = [
    ((At("new"),), {}),
    ((At("new", "bytes"), 0o700), {}),
    ((At("new", "path"),), {"mode": 0o751}),
    ((At("file"),), {}),
    ((At("broken"),), {}),
    ((At("missing/x"),), {}),
    ((At("file/x"),), {}),
    (("new",), {"dir_fd": DIR_FD}),
    (("dir",), {"dir_fd": DIR_FD}),
    (("new",), {"dir_fd": 99999}),
    ((At("new"), "0o700"), {}),
    ((3,), {}),
]


async def test_mkdir(engine, fresh_twins):
    for args, kwargs in MKDIR_CASES:
        await same_change_as_os(fresh_twins(), ros.mkdir, os.mkdir, *args, **kwargs)


MAKEDIRS_CASES = [
    ((At("a/b/c"),), {}),
    ((At("a/b/c/"),), {}),
    ((At("a/b/c", "bytes"),), {}),
    ((At("a/b/c", "path"), 0o700), {}),
    ((At("a/./b"),), {}),
    ((At("dir"),), {}),
    ((At("dir"),), {"exist_ok": True}),
    ((At("dirlink"),), {"exist_ok": True}),
    ((At("dir/inner"),), {"exist_ok": True}),
    ((At("file/x/y"),), {"exist_ok": True}),
    ((At("broken"),), {"exist_ok": True}),
    ((At("broken/x"),), {}),
    (("rel/a",), {}),
    ((None,), {}),
]


async def test_makedirs(engine, fresh_twins, monkeypatch):
    for args, kwargs in MAKEDIRS_CASES:
        ref, got = fresh_twins()
        monkeypatch.chdir(ref.root)  # "rel/a" resolves in the reference tree...
        expected = ref.call(os.makedirs, *args, **kwargs)
        monkeypatch.chdir(got.root)  # ...and ours in its twin
        assert await got.acall(ros.makedirs, *args, **kwargs) == expected, args
        assert snapshot(got.root) == snapshot(ref.root), args


async def test_makedirs_gives_the_mode_to_the_leaf_only(engine, tmp_path: Path):
    old = os.umask(0o022)
    try:
        await ros.makedirs(tmp_path / "a" / "b", 0o700)
    finally:
        os.umask(old)
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "a" / "b").stat().st_mode & 0o777 == 0o700


async def test_makedirs_tolerates_a_concurrent_creator(engine, tmp_path: Path):
    target = tmp_path / "x" / "y" / "z"
    await asyncio.gather(*(ros.makedirs(target, exist_ok=True) for _ in range(8)))
    assert target.is_dir()


# -- rename, replace, renames -------------------------------------------------------------

RENAME_CASES = [
    ((At("file"), At("new")), {}),
    ((At("file", "bytes"), At("new", "bytes")), {}),
    ((At("file", "path"), At("dir/inner", "path")), {}),
    ((At("dir"), At("empty")), {}),
    ((At("dir"), At("file")), {}),
    ((At("file"), At("empty")), {}),
    ((At("empty"), At("dir")), {}),
    ((At("missing"), At("new")), {}),
    ((At("link"), At("newlink")), {}),
    ((At("broken"), At("dir/broken")), {}),
    ((At("dir"), At("dir/sub")), {}),
    ((At("file"), At("missing/new")), {}),
    (("file", "moved"), {"src_dir_fd": DIR_FD, "dst_dir_fd": DIR_FD}),
    (("file", At("moved")), {"src_dir_fd": DIR_FD}),
    (("nope", "moved"), {"src_dir_fd": DIR_FD, "dst_dir_fd": DIR_FD}),
    ((At("file"), 3), {}),
    ((At("file"), At("new")), {"src_dir_fd": 1.5}),
]


@pytest.mark.parametrize("name", ["rename", "replace"])
async def test_rename_and_replace(engine, fresh_twins, name):
    ours, theirs = getattr(ros, name), getattr(os, name)
    for args, kwargs in RENAME_CASES:
        await same_change_as_os(fresh_twins(), ours, theirs, *args, **kwargs)


RENAMES_CASES = [
    (At("file"), At("x/y/z/file")),
    (At("dir/inner"), At("moved")),  # dir is left empty: pruned
    (At("dir/inner"), At("empty/deeper/inner")),
    (At("missing"), At("x/y")),
    (At("file"), At("file/x")),
]


async def test_renames(engine, fresh_twins):
    for args in RENAMES_CASES:
        await same_change_as_os(fresh_twins(), ros.renames, os.renames, *args)


# -- remove, unlink, rmdir, removedirs -------------------------------------------------------

UNLINK_CASES = [
    ((At("file"),), {}),
    ((At("file", "bytes"),), {}),
    ((At("link"),), {}),
    ((At("broken"),), {}),
    ((At("dirlink"),), {}),
    ((At("dir"),), {}),
    ((At("missing"),), {}),
    ((At("file/x"),), {}),
    (("file",), {"dir_fd": DIR_FD}),
    (("missing",), {"dir_fd": DIR_FD}),
    ((3,), {}),
    (("",), {}),
]


@pytest.mark.parametrize("name", ["remove", "unlink"])
async def test_remove_and_unlink(engine, fresh_twins, name):
    ours, theirs = getattr(ros, name), getattr(os, name)
    for args, kwargs in UNLINK_CASES:
        await same_change_as_os(fresh_twins(), ours, theirs, *args, **kwargs)


RMDIR_CASES = [
    ((At("empty"),), {}),
    ((At("empty", "path"),), {}),
    ((At("dir"),), {}),
    ((At("file"),), {}),
    ((At("dirlink"),), {}),
    ((At("missing"),), {}),
    ((At("empty/."),), {}),
    (("empty",), {"dir_fd": DIR_FD}),
    (("dir",), {"dir_fd": DIR_FD}),
]


async def test_rmdir(engine, fresh_twins):
    for args, kwargs in RMDIR_CASES:
        await same_change_as_os(fresh_twins(), ros.rmdir, os.rmdir, *args, **kwargs)


async def test_removedirs(engine, fresh_twins):
    for target in ["a/b/c", "a/b/c/", "dir/x/y", "a/b", "missing", "file"]:
        twins = fresh_twins()
        for t in twins:
            os.makedirs(t.root / "a" / "b" / "c")
            (t.root / "a" / "keep").write_bytes(b"")
            os.makedirs(t.root / "dir" / "x" / "y")
        await same_change_as_os(twins, ros.removedirs, os.removedirs, At(target))


# -- link, symlink, readlink ------------------------------------------------------------------


LINK_CASES = [
    ((At("file"), At("hard")), {}),
    ((At("link"), At("hard")), {}),
    ((At("link"), At("hard")), {"follow_symlinks": False}),
    ((At("broken"), At("hard")), {}),
    ((At("broken"), At("hard")), {"follow_symlinks": False}),
    ((At("dir"), At("hard")), {}),
    ((At("file"), At("dir/inner")), {}),
    ((At("missing"), At("hard")), {}),
    ((At("file"), At("missing/hard")), {}),
    (("file", "hard"), {"src_dir_fd": DIR_FD, "dst_dir_fd": DIR_FD}),
    (("file", At("hard", "bytes")), {"src_dir_fd": DIR_FD}),
]


async def test_link(engine, fresh_twins):
    for args, kwargs in LINK_CASES:
        await same_change_as_os(fresh_twins(), ros.link, os.link, *args, **kwargs)


SYMLINK_CASES = [
    (("file", At("new")), {}),
    ((b"dir", At("new", "bytes")), {}),
    (("nowhere", At("new", "path")), {}),
    (("dir", At("new"), True), {}),
    (("file", At("file")), {}),
    (("file", At("missing/new")), {}),
    (("file", "new"), {"dir_fd": DIR_FD}),
    (("file", "link"), {"dir_fd": DIR_FD}),
    ((None, At("new")), {}),
    (("", At("new")), {}),
]


async def test_symlink(engine, fresh_twins):
    for args, kwargs in SYMLINK_CASES:
        await same_change_as_os(fresh_twins(), ros.symlink, os.symlink, *args, **kwargs)


READLINK_CASES = [
    ((At("link"),), {}),
    ((At("broken", "bytes"),), {}),
    ((At("dirlink", "path"),), {}),
    ((At("file"),), {}),
    ((At("missing"),), {}),
    (("link",), {"dir_fd": DIR_FD}),
]


async def test_readlink(engine, tree: Tree):
    for args, kwargs in READLINK_CASES:
        await same_as_os(tree, ros.readlink, os.readlink, *args, **kwargs)


# -- listdir, scandir, access, getcwd, statvfs, sendfile ----------------------------------------


async def test_listdir(engine, tree: Tree):
    for arg in [At(""), At("", "bytes"), At("dir", "path"), At("dirlink"), At("file"), At("m")]:
        await same_as_os(tree, ros.listdir, os.listdir, arg)


async def test_listdir_of_the_cwd_and_of_an_fd(engine, tree: Tree, monkeypatch):
    monkeypatch.chdir(tree.root / "dir")
    assert await ros.listdir() == os.listdir() == ["inner"]
    fd = os.open(tree.root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert sorted(await ros.listdir(fd)) == sorted(os.listdir(tree.root))
    finally:
        os.close(fd)


def entries(it) -> list[tuple]:
    return sorted(
        (e.name, e.path, e.is_symlink(), e.is_dir(follow_symlinks=False),
         e.is_file(follow_symlinks=False), e.inode())
        for e in it
    )


async def test_scandir(engine, tree: Tree, monkeypatch):
    with os.scandir(tree.root) as it:
        expected = entries(it)
    with await ros.scandir(tree.root) as it:
        assert entries(it) == expected
        assert list(it) == []  # exhausted, like os's
    it = await ros.scandir(os.fsencode(tree.root / "dir"))
    names = [e.name for e in it]
    assert names == [b"inner"]
    it = await ros.scandir(tree.root)
    it.close()
    assert list(it) == []
    monkeypatch.chdir(tree.root / "dir")
    assert [e.path for e in await ros.scandir()] == [e.path for e in os.scandir()]
    with pytest.raises(FileNotFoundError) as info:
        await ros.scandir(tree.root / "missing")
    assert info.value.filename == str(tree.root / "missing")
    with pytest.raises(NotADirectoryError):
        await ros.scandir(tree.root / "file")


ACCESS_CASES = [
    ((At("file"), os.R_OK | os.W_OK), {}),
    ((At("file"), os.X_OK), {}),
    ((At("missing"), os.F_OK), {}),
    ((At("broken"), os.F_OK), {}),
    ((At("broken"), os.F_OK), {"follow_symlinks": False}),
    (("file", os.R_OK), {"dir_fd": DIR_FD}),
    ((At("file"), os.R_OK), {"effective_ids": True}),
    ((At("file"), "r"), {}),
]


async def test_access(engine, tree: Tree):
    for args, kwargs in ACCESS_CASES:
        await same_as_os(tree, ros.access, os.access, *args, **kwargs)


async def test_getcwd_statvfs_sendfile(engine, tree: Tree, monkeypatch):
    monkeypatch.chdir(tree.root / "dir")
    assert await ros.getcwd() == os.getcwd() == str(tree.root / "dir")

    got, ref = await ros.statvfs(tree.root), os.statvfs(tree.root)
    fields = ("f_bsize", "f_frsize", "f_blocks", "f_files", "f_flag", "f_namemax")
    assert [getattr(got, f) for f in fields] == [getattr(ref, f) for f in fields]
    with pytest.raises(FileNotFoundError):
        await ros.statvfs(tree.root / "missing")

    src = os.open(tree.root / "dir" / "inner", os.O_RDONLY)
    dst = os.open(tree.root / "copy", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        assert await ros.sendfile(dst, src, 10, 50) == 50
        assert await ros.sendfile(dst, src, None, 1000) == 100  # from src's position
        assert await ros.sendfile(dst, src, 100, 10) == 0  # at end of file
        with pytest.raises(OSError) as info:
            await ros.sendfile(dst, 99999, 0, 10)
        assert info.value.errno == 9
    finally:
        os.close(src)
        os.close(dst)
    assert (tree.root / "copy").read_bytes() == b"x" * 150


async def test_wrap_runs_on_the_fallback_pool(engine, tree: Tree):
    loop_thread = threading.get_ident()
    getsize = ros.wrap(os.path.getsize)
    assert getsize.__name__ == "getsize"
    assert await getsize(tree.root / "file") == 5
    assert await ros.wrap(threading.get_ident)() != loop_thread
    with pytest.raises(FileNotFoundError):
        await getsize(tree.root / "missing")


async def test_loop_and_executor_keywords(engine, tree: Tree):
    import concurrent.futures

    loop = asyncio.get_running_loop()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mine") as pool:
        name = await ros.wrap(lambda: threading.current_thread().name)(executor=pool)
        assert name.startswith("mine")
        assert await ros.listdir(tree.root / "dir", loop=loop, executor=pool) == ["inner"]
    assert (await ros.stat(tree.root / "file", loop=loop)).st_size == 5
    other = asyncio.new_event_loop()
    try:
        with pytest.raises(ValueError):
            await ros.stat(tree.root / "file", loop=other)
    finally:
        other.close()


async def test_many_concurrent_calls(engine, tmp_path: Path):
    """A burst of kernel ops and fallback calls at once all complete, correctly."""
    names = [f"d{i}" for i in range(64)]
    await asyncio.gather(*(ros.mkdir(tmp_path / n) for n in names))
    await asyncio.gather(*(ros.symlink(n, tmp_path / f"l{n}") for n in names))
    targets = await asyncio.gather(*(ros.readlink(tmp_path / f"l{n}") for n in names))
    assert targets == names
    sts = await asyncio.gather(*(ros.stat(tmp_path / f"l{n}") for n in names))
    assert all(st.st_nlink == 2 for st in sts)
    await asyncio.gather(*(ros.unlink(tmp_path / f"l{n}") for n in names))
    await asyncio.gather(*(ros.rmdir(tmp_path / n) for n in names))
    assert os.listdir(tmp_path) == []


async def test_cancelled_call_leaves_the_engine_usable(engine, tmp_path: Path):
    task = asyncio.ensure_future(ros.mkdir(tmp_path / "x"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await ros.makedirs(tmp_path / "x", exist_ok=True)
    assert await ros.path.isdir(tmp_path / "x")


async def test_kernel_refusals(engine, twins):
    """What the kernel refuses even to root: EPERM in /proc and /sys."""
    ref, got = twins
    for ours, theirs, args in [
        (ros.unlink, os.unlink, ("/proc/self/status",)),
        (ros.rmdir, os.rmdir, ("/proc/self/fd",)),
        (ros.mkdir, os.mkdir, ("/sys/ringio-test",)),
        (ros.rename, os.rename, ("/proc/self/status", "/proc/self/x")),
    ]:
        assert await got.acall(ours, *args) == ref.call(theirs, *args)
