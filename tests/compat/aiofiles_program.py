"""A small program written for aiofiles 25.1, unchanged: the tests run it with
``aiofiles`` being the real package and with it aliased to ringio.compat.aiofiles,
and compare what it reports."""

import os

import aiofiles
import aiofiles.os
import aiofiles.tempfile
from aiofiles.threadpool.binary import AsyncBufferedIOBase
from aiofiles.threadpool.text import AsyncTextIOWrapper


async def main(workdir):
    report = []
    path = os.path.join(workdir, "notes.txt")
    async with aiofiles.open(path, mode="w") as f:
        assert isinstance(f, AsyncTextIOWrapper)
        for i in range(3):
            await f.write(f"note {i}\n")
    async with aiofiles.open(path) as f:
        report.append(await f.readline())
        report.append([line async for line in f])
    f = await aiofiles.open(path, "rb")
    assert isinstance(f, AsyncBufferedIOBase)
    report.append(await f.read())
    await f.close()
    try:
        await f.read()
    except ValueError:
        report.append("closed")

    report.append(await aiofiles.os.path.exists(path))
    report.append((await aiofiles.os.stat(path)).st_size)
    await aiofiles.os.mkdir(os.path.join(workdir, "sub"))
    await aiofiles.os.rename(path, os.path.join(workdir, "sub", "moved.txt"))
    report.append(sorted(await aiofiles.os.listdir(workdir)))
    report.append(await aiofiles.os.path.isfile(os.path.join(workdir, "sub", "moved.txt")))
    await aiofiles.os.remove(os.path.join(workdir, "sub", "moved.txt"))
    report.append(await aiofiles.os.path.exists(os.path.join(workdir, "sub", "moved.txt")))
    try:
        await aiofiles.os.remove(path)
    except FileNotFoundError as e:
        report.append(("missing", os.path.basename(e.filename)))

    async with aiofiles.tempfile.TemporaryDirectory(dir=workdir) as d:
        async with aiofiles.tempfile.NamedTemporaryFile("w+", dir=d, delete=False) as t:
            await t.write("temp")
            await t.seek(0)
            report.append(await t.read())
            name = t.name
        report.append(await aiofiles.os.path.exists(name))
    report.append(await aiofiles.os.path.exists(d))
    async with aiofiles.tempfile.TemporaryFile() as t:
        await t.write(b"abc")
        await t.seek(0)
        report.append(await t.read())
    async with aiofiles.tempfile.SpooledTemporaryFile(max_size=3) as s:
        await s.write(b"abcdef")
        await s.seek(1)
        report.append(await s.read())
    return report
