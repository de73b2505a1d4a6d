"""Copy a file with kernel AIO on asyncio: many reads and writes in flight at once.

    python examples/aio_copy.py SOURCE DEST
"""

from __future__ import annotations

import asyncio
import os
import sys

from ringio import aio

CHUNK = 1 << 20


async def copy(src: str, dst: str) -> int:
    fin = os.open(src, os.O_RDONLY)
    fout = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        size = os.fstat(fin).st_size
        async with aio.AsyncContext() as actx:

            async def chunk(offset: int) -> int:
                data = await actx.read(fin, CHUNK, offset)
                return await actx.write(fout, data, offset)

            copied = sum(await asyncio.gather(*(chunk(o) for o in range(0, size, CHUNK))))
            await actx.fsync(fout)
            return copied
    finally:
        os.close(fin)
        os.close(fout)


if __name__ == "__main__":
    print(asyncio.run(copy(sys.argv[1], sys.argv[2])), "bytes copied")
