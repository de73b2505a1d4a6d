"""Hash many files at once: each file is read with pread_many, 16 reads in flight.

    python examples/parallel_hash.py FILE [FILE ...]

Prints "SHA256  NAME" per file, like sha256sum. The reads of every file go to the
kernel together; the hashing consumes the chunks in file order.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys

import ringio
import ringio.os

CHUNK = 256 * 1024
DEPTH = 16


async def sha256(path: str) -> str:
    h = hashlib.sha256()
    async with ringio.open(path, "rb") as f:
        size = (await ringio.os.stat(path)).st_size
        offsets = list(range(0, size, CHUNK))
        for k in range(0, len(offsets), 64):  # 64 chunks (16 MiB) per call bounds memory
            for chunk in await f.pread_many(CHUNK, offsets[k : k + 64], depth=DEPTH):
                h.update(chunk)
    return h.hexdigest()


async def main(paths: list[str]) -> None:
    for path, digest in zip(paths, await asyncio.gather(*map(sha256, paths)), strict=True):
        print(f"{digest}  {path}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
