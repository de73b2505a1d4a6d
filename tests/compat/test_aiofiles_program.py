"""An aiofiles program runs unchanged with ``aiofiles`` aliased to
ringio.compat.aiofiles, and reports what it reports on the real aiofiles; the
standard streams work through the engine in a child process."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap

import pytest

import ringio.compat.aiofiles as compat

PROGRAM = "tests.compat.aiofiles_program"


@pytest.fixture
def aliased():
    """sys.modules with aiofiles aliased to the compat package; restored after."""
    saved = compat.install()
    sys.modules.pop(PROGRAM, None)
    try:
        yield
    finally:
        compat.uninstall(saved)
        sys.modules.pop(PROGRAM, None)


async def _run(tmp_path, name):
    workdir = tmp_path / name
    workdir.mkdir()
    program = importlib.import_module(PROGRAM)
    return program, await program.main(str(workdir))


async def test_program_runs_unchanged(tmp_path, aliased):
    program, got = await _run(tmp_path, "ringio")
    assert program.aiofiles is compat  # really ran on ringio
    assert program.aiofiles.os is sys.modules["ringio.compat.aiofiles.os"]
    sys.modules.pop(PROGRAM)
    saved = {n: sys.modules.pop(n) for n in list(compat.MODULES)}
    try:
        program, expected = await _run(tmp_path, "aiofiles")
        assert program.aiofiles.__name__ == "aiofiles"
    finally:
        sys.modules.update(saved)
    assert got == expected
    assert got[0] == "note 0\n"


def test_install_and_uninstall_restore_modules():
    real = importlib.import_module("aiofiles")
    saved = compat.install()
    try:
        assert importlib.import_module("aiofiles") is compat
        assert importlib.import_module("aiofiles.os").path.exists is not None
        assert importlib.import_module("aiofiles.threadpool.binary").__name__.startswith("ringio")
    finally:
        compat.uninstall(saved)
    assert importlib.import_module("aiofiles") is real
    assert importlib.import_module("aiofiles.os").__name__ == "aiofiles.os"


CHILD = textwrap.dedent("""
    import asyncio, sys
    if sys.argv[1] == "ringio":
        import ringio.compat.aiofiles
        ringio.compat.aiofiles.install()
    import aiofiles

    async def main():
        print("from print", flush=False)
        line = await aiofiles.stdin.readline()
        await aiofiles.stdout.write("echo: " + line)
        data = await aiofiles.stdin_bytes.read()
        await aiofiles.stdout_bytes.write(b"rest: " + data)
        await aiofiles.stderr.write("to stderr\\n")
        print("after", aiofiles.stdout.name, aiofiles.stdout.closed, aiofiles.__name__)

    asyncio.run(main())
""")


def _child(which: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, which], input=b"first line\nsecond\nthird",
        capture_output=True, timeout=60,
    )  # fmt: skip


SYNC_CHILD = textwrap.dedent("""
    import sys
    print("from print", flush=False)
    line = sys.stdin.readline()
    sys.stdout.write("echo: " + line)
    data = sys.stdin.buffer.read()
    sys.stdout.buffer.write(b"rest: " + data)
    sys.stderr.write("to stderr\\n")
    print("after", sys.stdout.name, sys.stdout.closed, "ringio.compat.aiofiles")
""")


def test_standard_streams_through_pipes():
    """Same output as on aiofiles, whose text stdin reads ahead as ours does (so
    stdin_bytes finds the pipe drained), and as the same calls on the stdlib's
    streams. On 3.14 the stdlib's streams (and aiofiles, which calls them) put the
    bytes written to stdout.buffer ahead of the text written before them; ringio keeps
    the program's order (docs/compat-aiofiles.md): there the bytes must be the same,
    in the order the program wrote them."""
    ours, theirs = _child("ringio"), _child("aiofiles")
    assert ours.returncode == 0, ours.stderr.decode()
    assert theirs.returncode == 0, theirs.stderr.decode()
    if sys.version_info < (3, 14):
        assert ours.stdout.decode() == theirs.stdout.decode().replace(
            "aiofiles\n", "ringio.compat.aiofiles\n"
        )
    sync = subprocess.run(
        [sys.executable, "-c", SYNC_CHILD], input=b"first line\nsecond\nthird",
        capture_output=True, timeout=60,
    )  # fmt: skip
    # The stdlib's text stdin reads ahead too: its buffer.read() finds the pipe drained.
    if sys.version_info < (3, 14):
        assert ours.stdout == sync.stdout, (ours.stdout, sync.stdout)
    else:
        assert sorted(ours.stdout) == sorted(sync.stdout), (ours.stdout, sync.stdout)
    assert ours.stdout.decode() == (
        "from print\necho: first line\nrest: after <stdout> False ringio.compat.aiofiles\n"
    )
    assert ours.stderr == theirs.stderr == b"to stderr\n"
