"""Permission errors: ringio.os as an unprivileged user, compared with os.

Root passes every permission check, so the comparison runs in a forked child that
drops to user and group 65534 (nobody) before making its event loop and engine."""

from __future__ import annotations

import asyncio
import os
import pickle
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.os.reference import Tree

import ringio._engines as engines
import ringio.os as ros

NOBODY = 65534


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory nobody can reach (pytest's tmp_path is under a 0700 directory)."""
    base = Path(tempfile.mkdtemp(prefix="ringio-perm-"))
    base.chmod(0o755)
    (base / "locked").mkdir()
    (base / "locked" / "f").write_bytes(b"secret")
    (base / "locked").chmod(0)
    (base / "ro").mkdir()
    (base / "ro" / "f").write_bytes(b"x")
    (base / "ro" / "sub").mkdir()
    (base / "ro").chmod(0o555)
    os.symlink("locked/f", base / "to_locked")
    yield base
    for d in ("locked", "ro"):
        (base / d).chmod(0o755)
    shutil.rmtree(base)


CASES = [
    ("stat", ("locked/f",), {}),
    ("stat", ("to_locked",), {}),
    ("stat", ("to_locked",), {"follow_symlinks": False}),
    ("mkdir", ("ro/new",), {}),
    ("mkdir", ("locked/new",), {}),
    ("unlink", ("ro/f",), {}),
    ("remove", ("locked/f",), {}),
    ("rmdir", ("ro/sub",), {}),
    ("rename", ("ro/f", "ro/g"), {}),
    ("replace", ("ro/f", "moved"), {}),
    ("link", ("ro/f", "ro/h"), {}),
    ("symlink", ("f", "ro/s"), {}),
    ("makedirs", ("ro/a/b",), {}),
    ("makedirs", ("ro/sub",), {"exist_ok": True}),
    ("makedirs", ("locked/a",), {"exist_ok": True}),
    ("removedirs", ("ro/sub",), {}),
    ("listdir", ("locked",), {}),
    ("readlink", ("locked/f",), {}),
    ("access", ("locked/f", os.R_OK), {}),
    ("access", ("ro", os.W_OK), {}),
    ("path.exists", ("locked/f",), {}),
    ("path.exists", ("to_locked",), {}),
    ("path.isfile", ("locked/f",), {}),
    ("path.isdir", ("locked",), {}),
    ("path.islink", ("to_locked",), {}),
    ("path.getsize", ("locked/f",), {}),
]


def resolve(module, name):
    for part in name.split("."):
        module = getattr(module, part)
    return module


async def compare_as_nobody(base: Path) -> list:
    tree = Tree(base, -1)
    out = []
    for name, args, kwargs in CASES:
        args = tuple(str(base / a) if isinstance(a, str) else a for a in args)
        expected = tree.call(resolve(os, name), *args, **kwargs)
        got = await tree.acall(resolve(ros, name), *args, **kwargs)
        out.append((name, args, expected, got))
    return out


async def warm_up(base: Path) -> None:
    await ros.listdir(base)
    await ros.path.exists(base / "ro")
    await ros.access(base, os.R_OK)


def test_permission_errors_as_nobody(engine_name, shared_dir: Path):
    if os.getuid() != 0:
        pytest.skip("needs root to switch to an unprivileged user")
    # Import now whatever the calls import lazily (the fallback pool's modules):
    # the child, as nobody, cannot read this interpreter's library under /root.
    asyncio.run(warm_up(shared_dir))
    # An engine left from a finished loop breaks a forked child's new engine
    # (FileExistsError on uring, EINVAL on aio: reported); start the child clean.
    engines.reset()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            result = asyncio.run(compare_as_nobody(shared_dir))
            payload = pickle.dumps(("ok", result))
        except BaseException as e:
            payload = pickle.dumps(("error", repr(e)))
        with os.fdopen(w, "wb") as f:
            f.write(payload)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        status, result = pickle.loads(f.read())
    os.waitpid(pid, 0)
    assert status == "ok", result
    assert len(result) == len(CASES)
    refused = 0
    for name, args, expected, got in result:
        assert got == expected, (name, args, got, expected)
        refused += expected[0] == "raised" and expected[1] is PermissionError
    assert refused >= 10  # the cases really ran unprivileged
    assert (shared_dir / "ro" / "f").exists() and not (shared_dir / "moved").exists()
