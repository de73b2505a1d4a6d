"""Readers on the loop's thread never wait inside a read(2): on every engine and
both loops, a read the engine makes after POLLIN is non-blocking (RWF_NOWAIT, or
O_NONBLOCK for that call) and goes back to waiting when another reader took the
bytes first."""

from __future__ import annotations

import asyncio
import os
import pty
import threading
import time
import tty

import pytest
from tests.files.streams import blocked, close_writer, run, send, stream  # noqa: F401

import ringio

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("kind", ["pipe", "socket"])
def test_two_readers_of_one_blocking_stream_never_block_the_loop(run, kind):  # noqa: F811
    """Both readers are told the stream is readable; the first takes the bytes. The
    second must go back to waiting, not wait inside read(2) on the loop's thread."""

    async def main() -> None:
        r, w = stream(kind)
        os.set_blocking(r, True)
        r2 = os.dup(r)
        unblock = threading.Timer(3, lambda: send(w, b"late"))
        try:
            async with (
                ringio.open(r, "rb", buffering=0) as f1,
                ringio.open(r2, "rb", buffering=0) as f2,
            ):
                reads = [asyncio.ensure_future(f.read(100)) for f in (f1, f2)]
                await blocked(reads[0])
                unblock.start()
                send(w, b"0123456789")
                t0 = time.monotonic()
                await asyncio.sleep(0.2)
                stalled = time.monotonic() - t0
                assert stalled < 1.5, f"the loop stood still for {stalled:.1f} s"
                done = [t for t in reads if t.done()]
                assert len(done) == 1 and done[0].result() == b"0123456789"
                for t in reads:
                    t.cancel()
        finally:
            unblock.cancel()
            close_writer(w)

    run(main())


def test_two_readers_of_one_terminal_never_block_the_loop(run):  # noqa: F811
    """Terminals refuse RWF_NOWAIT (and kernel AIO's poll): the read after readiness
    sets O_NONBLOCK for that one call, and the file's flags are as they were."""

    async def main() -> None:
        master, slave = pty.openpty()
        tty.setraw(slave)
        unblock = threading.Timer(3, lambda: os.write(master, b"late"))
        try:
            async with (
                ringio.open(slave, "rb", buffering=0, closefd=False) as f1,
                ringio.open(slave, "rb", buffering=0, closefd=False) as f2,
            ):
                reads = [asyncio.ensure_future(f.read(100)) for f in (f1, f2)]
                await blocked(reads[0])
                unblock.start()
                os.write(master, b"0123456789")
                t0 = time.monotonic()
                await asyncio.sleep(0.2)
                stalled = time.monotonic() - t0
                assert stalled < 1.5, f"the loop stood still for {stalled:.1f} s"
                done = [t for t in reads if t.done()]
                assert len(done) == 1 and done[0].result() == b"0123456789"
                for t in reads:
                    t.cancel()
            assert os.get_blocking(slave)
        finally:
            unblock.cancel()
            os.close(master)
            os.close(slave)

    run(main())
