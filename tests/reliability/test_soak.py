"""Soak: thousands of concurrent file and socket ops with random cancellations and
timeouts on each kernel engine; every byte is verified, and RSS, open fds and
threads must stay flat.

About 60 s in CI (CI=true), 10 s otherwise; RINGIO_SOAK_SECONDS sets it."""

from __future__ import annotations

import asyncio
import errno
import gc
import hashlib
import os
import random
import socket
import time
from pathlib import Path

import pytest
from tests.conftest import user_thread_count

import ringio
import ringio._engines as engines
from ringio import _core
from ringio._proactor import LoopRingProactor

SECONDS = float(os.environ.get("RINGIO_SOAK_SECONDS", "60" if os.environ.get("CI") else "10"))
REGION = 4096
FILE_WORKERS = 1024
SOCKET_PAIRS = 64


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


class Soak:
    def __init__(self, engine: engines.FileEngine, seed: int) -> None:
        self.engine = engine
        self.loop = asyncio.get_running_loop()
        self.rng = random.Random(seed)
        self.ops = 0
        self.cancelled = 0
        self.bytes_verified = 0
        # What each file region holds, carried from one phase's workers to the
        # next: a phase's first write may be cancelled before it reaches the kernel,
        # and the region then still holds what the last phase wrote.
        self.contents: dict[int, bytes] = {}

    def start(self, make, *args) -> tuple[_core.Op, asyncio.Future]:
        fut = self.loop.create_future()
        op = make(*args, data=fut)
        self.engine._proactor.start(op)
        self.ops += 1
        return op, fut

    async def settle(self, op: _core.Op, fut: asyncio.Future) -> int | None:
        """The op's real result: awaited, or with a random cancellation or timeout,
        in which case we wait (boundedly) until the kernel is really done with it."""
        roll = self.rng.random()
        try:
            if roll < 0.15:
                await asyncio.sleep(0)
                fut.cancel()
            elif roll < 0.25:
                return await asyncio.wait_for(asyncio.shield(fut), self.rng.random() * 1e-4)
            return await fut
        except (asyncio.CancelledError, TimeoutError):
            self.cancelled += 1
            fut.cancel()
        deadline = time.monotonic() + 10
        while op.state != "done":  # "idle" = dropped before reaching the kernel
            if op.state == "idle" and fut.cancelled():
                return None
            assert time.monotonic() < deadline, "a cancelled op never completed"
            await asyncio.sleep(0.001)
        return op.result

    async def file_worker(self, fd: int, index: int, stop: float) -> None:
        offset = index * REGION
        content = self.contents.get(index, bytes(REGION))
        while time.monotonic() < stop:
            data = self.rng.randbytes(REGION)
            op, fut = self.start(_core.pwrite, fd, data, offset)
            res = await self.settle(op, fut)
            if res is not None and res > 0:
                content = data[:res] + content[res:]
                self.contents[index] = content
            elif res is not None and res < 0:
                # The kernel really cancelled it: nothing landed.
                assert res == -errno.ECANCELED, f"pwrite failed: {os.strerror(-res)}"
            buf = bytearray(REGION)
            op, fut = self.start(_core.pread, fd, buf, offset)
            res = await self.settle(op, fut)
            if res is not None and res >= 0:
                assert res == REGION and buf == content, "read back differs from what landed"
                self.bytes_verified += res
            elif res is not None:
                assert res == -errno.ECANCELED, f"pread failed: {os.strerror(-res)}"

    async def socket_pair(self, stop: float) -> None:
        a, b = socket.socketpair()
        a.setblocking(False)
        b.setblocking(False)
        sent = hashlib.sha256()
        received = hashlib.sha256()
        total_sent = total_received = 0
        pending = b""

        async def writer() -> None:
            nonlocal total_sent, pending
            while time.monotonic() < stop:
                if not pending:
                    pending = self.rng.randbytes(self.rng.randint(1, 8192))
                op, fut = self.start(_core.write, a, pending)
                res = await self.settle(op, fut)
                if res is not None and res < 0:
                    assert res == -errno.ECANCELED, os.strerror(-res)
                elif res is not None and res > 0:
                    sent.update(pending[:res])
                    total_sent += res
                    pending = pending[res:]
            a.shutdown(socket.SHUT_WR)

        async def reader() -> None:
            nonlocal total_received
            while True:
                buf = bytearray(self.rng.randint(1, 16384))
                op, fut = self.start(_core.read, b, buf)
                res = await self.settle(op, fut)
                if res == 0:
                    return  # EOF after the writer's shutdown
                if res is not None and res < 0:
                    assert res == -errno.ECANCELED, os.strerror(-res)
                elif res is not None and res > 0:
                    received.update(buf[:res])
                    total_received += res

        try:
            await asyncio.wait_for(asyncio.gather(writer(), reader()), SECONDS + 30)
        finally:
            a.close()
            b.close()
        assert total_received == total_sent and received.digest() == sent.digest()
        self.bytes_verified += total_received


@pytest.mark.parametrize("name", ["uring", "aio"])
async def test_soak_with_random_cancellations(name, tmp_path: Path, monkeypatch):
    await _soak(name, tmp_path, monkeypatch)


def test_soak_on_ringio_loop(tmp_path: Path, monkeypatch):
    """The uring engine on ringio.EventLoop: file and socket ops on the loop's own
    ring (staged, cancelled and settled through its select)."""
    ringio.run(_soak("uring", tmp_path, monkeypatch, on_loop_ring=True))


async def _soak(name: str, tmp_path: Path, monkeypatch, on_loop_ring: bool = False) -> None:
    if engines._usable(name):
        pytest.skip(f"{name} unavailable")
    monkeypatch.setenv("RINGIO_ENGINE", name)
    engines.reset()
    try:
        engine = engines.get()
        assert isinstance(engine._proactor, LoopRingProactor) == on_loop_ring
        soak = Soak(engine, seed=hash(name) & 0xFFFF)
        fd = os.open(tmp_path / "soak", os.O_RDWR | os.O_CREAT, 0o600)
        os.ftruncate(fd, FILE_WORKERS * REGION)
        try:
            async def phase(seconds: float) -> None:
                stop = time.monotonic() + seconds
                work = [soak.file_worker(fd, i, stop) for i in range(FILE_WORKERS)]
                if name == "uring":  # kernel AIO has no read/write at the position
                    work += [soak.socket_pair(stop) for _ in range(SOCKET_PAIRS)]
                await asyncio.gather(*work)

            # A quarter of the run at full concurrency reaches the working set; the
            # baseline is taken after it, so growth over the rest is a leak.
            await phase(SECONDS / 4)
            # Objects of earlier tests (sockets, rings of collected loops) may still
            # wait for the cyclic GC: collect them now, not in the middle of the count.
            gc.collect()
            base_rss, base_fds, base_threads = (
                rss_kib(), len(os.listdir("/proc/self/fd")), user_thread_count()
            )
            await phase(SECONDS * 3 / 4)
            for _ in range(100):  # every completion reaped
                if engine._queue.in_flight == 0:
                    break
                await asyncio.sleep(0.01)
            gc.collect()
            end_fds = len(os.listdir("/proc/self/fd"))
            grew = rss_kib() - base_rss
        finally:
            os.close(fd)
        assert engine._queue.in_flight == 0
        print(
            f"\nsoak[{name}{' on the loop ring' if on_loop_ring else ''}] {SECONDS:.0f}s: "
            f"{soak.ops} ops, {soak.cancelled} cancelled or "
            f"timed out, {soak.bytes_verified / 1e6:.1f} MB verified, RSS +{grew} KiB"
        )
        assert soak.ops > 1000 and soak.cancelled > 100
        assert end_fds <= base_fds, f"fds grew from {base_fds} to {end_fds}"
        assert user_thread_count() == base_threads
        assert grew < 16 * 1024, f"RSS grew by {grew} KiB"
    finally:
        engines.reset()
