"""When the kernel refuses io_uring (or AIO too), ringio falls back and still works:
the engine suites run under a seccomp filter like Docker's default profile."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DENY = [sys.executable, str(ROOT / "tools" / "seccomp_deny.py")]


def run_denied(groups: list[str], *cmd: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RINGIO_ENGINE"}
    return subprocess.run(
        [*DENY, *groups, "--", *cmd], capture_output=True, text=True, timeout=300, cwd=ROOT,
        env=env,
    )


def engine_report(groups: list[str]) -> str:
    out = run_denied(
        groups, sys.executable, "-c",
        "import ringio; i = ringio.engine(); print(i.name); print(i.refused)",
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the filter knows x86_64 numbers")
def test_io_uring_refused_falls_back_to_kernel_aio_and_says_why():
    report = engine_report(["io_uring"])
    name, refused = report.splitlines()
    assert name == "aio"
    assert "uring" in refused and "Operation not permitted" in refused


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the filter knows x86_64 numbers")
def test_both_refused_falls_back_to_threads():
    name, refused = engine_report(["io_uring", "aio"]).splitlines()
    assert name == "thread" and "uring" in refused and "aio" in refused


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the filter knows x86_64 numbers")
@pytest.mark.parametrize("groups", [["io_uring"], ["io_uring", "aio"]], ids=["no-uring", "none"])
def test_the_file_engine_suite_passes_on_the_fallback(groups):
    out = run_denied(
        groups, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        "tests/engines", "tests/aio" if groups == ["io_uring"] else "tests/engines",
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout


_LOOP_FALLBACK = """
import asyncio, os, sys, warnings
import ringio

async def main():
    await asyncio.sleep(0.01)
    async with ringio.open(sys.argv[1], "rb") as f:  # files: the engine's fallback
        data = await f.read()
    reader, writer = await asyncio.open_connection(*server_address)
    writer.write(b"ping\\n")
    line = await reader.readline()
    writer.close()
    return type(asyncio.get_running_loop()).__name__, len(data), line

async def serve():
    async def echo(r, w):
        w.write(await r.readline())
        await w.drain()
        w.close()
    srv = await asyncio.start_server(echo, "127.0.0.1", 0)
    global server_address
    server_address = srv.sockets[0].getsockname()
    async with srv:
        return await main()

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    print(ringio.run(serve()))
print([str(w.message) for w in caught if w.category is RuntimeWarning])
try:
    ringio.EventLoop()
except OSError as e:
    print(type(e).__name__, e.errno, "io_uring" in str(e))
ringio.install()
print(type(asyncio.new_event_loop()).__name__)
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the filter knows x86_64 numbers")
def test_the_event_loop_falls_back_to_asyncio_where_io_uring_is_refused():
    """In a container whose seccomp profile refuses io_uring (Docker's default), a
    program that runs on ringio's loop still runs: ringio.run, new_event_loop and the
    installed policy give asyncio's own loop with a RuntimeWarning saying why, and
    files and sockets work on it; asking for ringio.EventLoop itself is refused with
    the kernel's error, at once rather than in the loop's first iteration."""
    out = run_denied(["io_uring"], sys.executable, "-c", _LOOP_FALLBACK, __file__)
    assert out.returncode == 0, out.stderr
    result, warned, refused, installed = out.stdout.splitlines()
    size = os.path.getsize(__file__)
    assert result == f"('_UnixSelectorEventLoop', {size}, b'ping\\n')"
    assert "io_uring is refused" in warned and "Operation not permitted" in warned
    assert refused == "PermissionError 1 True"
    assert installed == "_UnixSelectorEventLoop"
    assert "Traceback" not in out.stderr and "never awaited" not in out.stderr


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the filter knows x86_64 numbers")
def test_a_watcher_where_io_uring_is_refused_says_so():
    script = (
        "import ringio\n"
        "try:\n"
        "    ringio.Watcher()\n"
        "except OSError as e:\n"
        "    print(type(e).__name__, e.errno, e.strerror)\n"
    )
    out = run_denied(["io_uring"], sys.executable, "-c", script)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (
        "PermissionError 1 io_uring_setup: Operation not permitted (the Watcher needs io_uring)"
    )
