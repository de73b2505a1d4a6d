"""A log writer that sends each batch of records to the kernel in one writev.

    python examples/vectored_log.py LOGFILE [RECORDS]

Tasks append records to a queue; one writer task takes whatever has queued up
and writes it with a single ``await f.writev(records)`` (one io_uring op, no
joined copy), then fdatasync()s once per batch.
"""

from __future__ import annotations

import asyncio
import sys

import ringio

BATCH = 1024


async def writer(path: str, queue: asyncio.Queue[bytes | None]) -> int:
    written = 0
    async with ringio.open(path, "ab", buffering=0) as f:
        while True:
            records = [await queue.get()]
            while len(records) < BATCH and not queue.empty():
                records.append(queue.get_nowait())
            done = records[-1] is None
            records = [r for r in records if r is not None]
            while records:
                n = await f.writev(records)  # may be short, like os.writev
                written += n
                while records and n >= len(records[0]):
                    n -= len(records.pop(0))
                if records and n:
                    records[0] = records[0][n:]
            await f.fdatasync()
            if done:
                return written


async def main(path: str, count: int) -> None:
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    task = asyncio.create_task(writer(path, queue))

    async def producer(k: int) -> None:
        for i in range(k, count, 4):
            queue.put_nowait(f"record {i:08d}\n".encode())
            if i % 64 == 0:
                await asyncio.sleep(0)

    await asyncio.gather(*(producer(k) for k in range(4)))
    queue.put_nowait(None)
    print(f"{await task} bytes written")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 10_000))
