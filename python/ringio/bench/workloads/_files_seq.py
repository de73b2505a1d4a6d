"""The ``small_seq`` family of the ``files`` workload: a cached file read from start
to end in small blocks through the file's position (``read(n)`` and ``readinto``), as
its users write the loop."""

from __future__ import annotations

import os
from typing import Any

from ..worker import WorkerSkipped, import_peer
from ._files_contenders import RingioOpenFiles
from ._files_random import _rate, _rate_sync


def small_seq(spec: dict[str, Any]) -> dict[str, Any]:
    """ops/s and CPU µs per read of `read(block)` and of `readinto(buf)` over the
    whole file, passes repeated until `min_seconds` have passed (after one untimed
    pass). The file is opened once; each pass seeks to 0 first."""
    path, block, contender = spec["path"], spec["block"], spec["contender"]
    min_seconds = spec.get("min_seconds", 0.0)
    ops = -(-os.path.getsize(path) // block) + 1  # the last read returns b"" / 0
    rates: dict[str, float] = {}
    cpu: dict[str, float] = {}
    if contender == "open()":
        with open(path, "rb") as f:
            buf = bytearray(block)

            def read_pass() -> None:
                f.seek(0)
                read = f.read
                while read(block):
                    pass

            def readinto_pass() -> None:
                f.seek(0)
                readinto = f.readinto
                while readinto(buf):
                    pass

            for op, run in (("read", read_pass), ("readinto", readinto_pass)):
                rates[op], cpu[op] = _rate_sync(run, ops, min_seconds, warm_up=True)
        return {"ops_per_s": rates, "cpu_us": cpu}
    if contender == "aiofiles":
        opener = import_peer("aiofiles").open
        run = None
    elif contender.startswith("ringio.open[") and contender.endswith("]"):
        c = RingioOpenFiles(contender[12:-1])
        opener, run = c.ringio.open, c.run
    else:
        raise WorkerSkipped(f"no small sequential reads for {contender}")

    async def main() -> None:
        async with opener(path, "rb") as f:
            buf = bytearray(block)

            async def read_pass() -> None:
                await f.seek(0)
                read = f.read
                while await read(block):
                    pass

            async def readinto_pass() -> None:
                await f.seek(0)
                readinto = f.readinto
                while await readinto(buf):
                    pass

            for op, one in (("read", read_pass), ("readinto", readinto_pass)):
                rates[op], cpu[op] = await _rate(one, ops, min_seconds, warm_up=True)

    if run is None:
        import asyncio

        asyncio.run(main())
    else:
        run(main())
    return {"ops_per_s": rates, "cpu_us": cpu}
