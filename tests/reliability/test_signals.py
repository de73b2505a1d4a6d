"""Ctrl-C reaches every blocking wait in ringio, on the first SIGINT, as it reaches
``socket.recv()``: a child process blocks in the wait, the test sends it one real
SIGINT and expects it to end promptly with KeyboardInterrupt."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import ringio._engines as engines

# The child prints READY just before it blocks; the SIGINT follows after SETTLE s,
# so that the wait has started (the waits also check for signals before blocking).
READY = "READY"
SETTLE = 0.3
PROMPT = 5.0  # seconds the child may take to die after the SIGINT

PRELUDE = """
import asyncio, os, select, socket, sys, time
import ringio
from ringio import aio, uring

def ready():
    print("READY", flush=True)
"""

WAITS = {
    # A Watcher on its own ring: a read that never completes, wait_io() forever.
    "watcher-wait_io": """
a, b = socket.socketpair()
w = ringio.Watcher(loop=False)
w.read(None, a, bytearray(10))
w.wait_io(timeout=0)  # submitted
ready()
w.wait_io()
""",
    # The first wait after a submit: the interrupted io_uring_enter returns the
    # number of SQEs it submitted instead of EINTR.
    "watcher-wait_io-first": """
a, b = socket.socketpair()
w = ringio.Watcher(loop=False)
w.read(None, a, bytearray(10))
ready()
w.wait_io()
""",
    "watcher-wait_io-timeout": """
a, b = socket.socketpair()
w = ringio.Watcher(loop=False)
w.read(None, a, bytearray(10))
ready()
w.wait_io(timeout=3600)
""",
    "watcher-wait_io-deadline": """
a, b = socket.socketpair()
w = ringio.Watcher(loop=False)
w.read_timeout(None, a, bytearray(10), time.monotonic() + 3600)
ready()
w.wait_io()
""",
    "aio-get_events": """
a, b = socket.socketpair()
ctx = aio.Context(4)
ctx.submit([aio.poll(a, select.POLLIN)])
ready()
ctx.get_events(1)
""",
    "aio-get_events-timeout": """
a, b = socket.socketpair()
ctx = aio.Context(4)
ctx.submit([aio.poll(a, select.POLLIN)])
ready()
ctx.get_events(1, timeout=3600)
""",
    "uring-get_events": """
a, b = socket.socketpair()
ring = uring.Ring(4)
ring.submit([uring.poll(a, select.POLLIN)])
ready()
ring.get_events(1)
""",
    "uring-get_events-timeout": """
a, b = socket.socketpair()
ring = uring.Ring(4)
ring.submit([uring.poll(a, select.POLLIN)])
ready()
ring.get_events(1, timeout=3600)
""",
    # The event loop's select, with nothing to do: no handler of asyncio.run's.
    "loop-run_forever": """
loop = ringio.new_event_loop()
loop.call_soon(ready)
loop.run_forever()
""",
    # asyncio.run's SIGINT handler cancels the main task: KeyboardInterrupt too.
    "loop-ringio.run": """
async def main():
    ready()
    await asyncio.sleep(3600)
ringio.run(main())
""",
    "loop-socket-recv": """
async def main():
    a, b = socket.socketpair()
    a.setblocking(False)
    ready()
    await asyncio.get_running_loop().sock_recv(a, 10)
loop = ringio.new_event_loop()
loop.run_until_complete(main())
""",
    "loop-watcher-wait_io_async": """
async def main():
    a, b = socket.socketpair()
    w = ringio.Watcher(loop=True)
    w.read(None, a, bytearray(10))
    ready()
    await w.wait_io_async()
loop = ringio.new_event_loop()
loop.run_until_complete(main())
""",
    # A file read pending on a pipe through the file engine (RINGIO_ENGINE below),
    # on ringio's loop and on asyncio's.
    "file-read-ringio-loop": """
r, w = os.pipe()
async def main():
    async with ringio.open(r, "rb", buffering=0) as f:
        ready()
        await f.read(10)
loop = ringio.new_event_loop()
loop.run_until_complete(main())
""",
    "file-read-asyncio-loop": """
r, w = os.pipe()
async def main():
    async with ringio.open(r, "rb", buffering=0) as f:
        ready()
        await f.read(10)
loop = asyncio.new_event_loop()
loop.run_until_complete(main())
""",
}

ENGINE_DEPENDENT = {"file-read-ringio-loop", "file-read-asyncio-loop"}


def _cases():
    for name in WAITS:
        if name in ENGINE_DEPENDENT:
            for engine in ("uring", "aio", "thread"):
                yield pytest.param(name, engine, id=f"{name}-{engine}")
        else:
            yield pytest.param(name, None, id=name)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("name", "engine"), list(_cases()))
def test_first_sigint_interrupts_the_wait(name, engine):
    if engine is not None and engine != "thread" and (why := engines._usable(engine)):
        pytest.skip(f"{engine} engine unavailable: {why}")
    if name.startswith("aio") and (why := engines._usable("aio")):
        pytest.skip(why)
    env = dict(os.environ)
    if engine is not None:
        env["RINGIO_ENGINE"] = engine
    code = PRELUDE + textwrap.dedent(WAITS[name])
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = child.stdout.readline()
        assert line.strip() == READY, child.communicate(timeout=10)
        time.sleep(SETTLE)
        assert child.poll() is None, "the child did not block"
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        try:
            _, err = child.communicate(timeout=PROMPT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{name}: still blocked {PROMPT} s after one SIGINT")
        took = time.monotonic() - sent
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert "KeyboardInterrupt" in err, err
    assert child.returncode != 0
    assert took < PROMPT


@pytest.mark.timeout(120)
def test_ctrl_c_tests_pass_when_the_suite_starts_with_sigint_ignored():
    """`make test &` from a script: the suite inherits SIGINT ignored and must not
    pass that on to the children its Ctrl-C tests interrupt."""
    root = Path(__file__).resolve().parents[2]
    case = f"{Path(__file__).relative_to(root)}::test_first_sigint_interrupts_the_wait"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{case}[loop-run_forever]",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=100,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "1 passed" in run.stdout, run.stdout[-3000:]
