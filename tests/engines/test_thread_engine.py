"""The thread engine's bookkeeping of pool calls, under the interleavings its pool
threads make possible."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os

import pytest

from ringio._engines.thread import ThreadEngine


class _Finishes(concurrent.futures.Future):
    """A pool call that is still queued until someone asks whether it is done;
    asking finishes every call in `batch`, as pool threads finishing at that moment
    would (their done callbacks run in those threads, not the loop's)."""

    def __init__(self, batch: list[_Finishes]) -> None:
        super().__init__()
        self.batch = batch

    def done(self) -> bool:
        for cf in self.batch:
            if not concurrent.futures.Future.done(cf):
                cf.set_result(0)
        return super().done()


class _Pool(concurrent.futures.ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(1)
        self.batch: list[_Finishes] = []

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        if fn is os.fsync:  # the calls under test stay queued; the rest run
            cf = _Finishes(self.batch)
            self.batch.append(cf)
            return cf
        return super().submit(fn, *args, **kwargs)


def test_close_while_pool_calls_on_the_fd_finish(tmp_path):
    """close(fd) looks at the calls still pending on fd while pool threads finish
    and forget them: it must neither fail nor skip one."""
    loop = asyncio.new_event_loop()
    pool = _Pool()
    engine = ThreadEngine(loop)
    engine._fallback_pool = lambda: pool  # type: ignore[method-assign]
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:

        async def main() -> list[object]:
            calls = [asyncio.ensure_future(engine.fsync(fd)) for _ in range(32)]
            await asyncio.sleep(0)
            assert len(pool.batch) == 32
            await engine.close(fd)
            return await asyncio.gather(*calls, return_exceptions=True)

        assert loop.run_until_complete(asyncio.wait_for(main(), 10)) == [None] * 32
        with pytest.raises(OSError):  # nothing in this test opens another fd
            os.fstat(fd)
    finally:
        pool.shutdown()
        loop.close()
