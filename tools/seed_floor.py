"""What the linux_aio experiment costs an asyncio program before any file read:
``bench files``' first table (every 1 ms, read N small files whole) written in
several shapes, each in a fresh process, in interleaved rounds; wall time and process
CPU time (user + kernel, from getrusage) per run, as ratios to the built-in
``open()`` loop that ``bench files`` uses as its baseline.

Shapes:
  open()             the bench's baseline: ``f.seek(0); f.read(size)`` per file into
                     a list, then ``time.sleep(0.001)``
  gather             ``await asyncio.gather(*(f.pread(size, 0) for f in files))`` on
                     ringio's loop, then ``await asyncio.sleep(0.001)`` (the bench's
                     ringio.open contender)
  seq                ``[await f.pread(size, 0) for f in files]``: one cached read
                     after the other, each complete when called
  futures            gather over futures already done with ``os.pread``'s bytes: no
                     ringio read at all, only the loop, the futures and gather
  *@asyncio          the same on asyncio's own loop

The children keep their heap (glibc's MALLOC_TRIM_THRESHOLD_ and MALLOC_TOP_PAD_
set high), as the bench's worker process, which has run other code first, keeps
its own: a fresh small process gives the top of its heap back after each round and
faults it in again in the next, which at 12 files of 1-100 KB made `open()`'s round
263 µs of CPU instead of the bench's 98-112 (2026-11-28). `--glibc-defaults`
leaves glibc as it is.

usage: python tools/seed_floor.py [--rounds 3] [--reads 1000] [--files 1,6,12,24]
                                  [--glibc-defaults]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

SHAPES = ["open()", "gather", "seq", "futures", "gather@asyncio", "futures@asyncio"]

CHILD = r"""
import asyncio, json, os, resource, sys, time
shape, reads, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
sizes = [os.path.getsize(p) for p in paths]

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

if shape == "open()":
    files = [open(p, "rb") for p in paths]
    t0, c0 = time.perf_counter(), cpu()
    for _ in range(reads):
        out = []
        for f, s in zip(files, sizes):
            f.seek(0)
            out.append(f.read(s))
        time.sleep(0.001)
    print(json.dumps([time.perf_counter() - t0, cpu() - c0]))
    sys.exit()

import ringio

async def main():
    loop = asyncio.get_running_loop()
    if shape.startswith("futures"):
        fds = [os.open(p, os.O_RDONLY) for p in paths]
    else:
        files = [await ringio.open(p, "rb") for p in paths]
    t0, c0 = time.perf_counter(), cpu()
    for _ in range(reads):
        if shape.startswith("gather"):
            await asyncio.gather(*[f.pread(s, 0) for f, s in zip(files, sizes)])
        elif shape.startswith("seq"):
            out = [await f.pread(s, 0) for f, s in zip(files, sizes)]
        else:
            futs = []
            for fd, s in zip(fds, sizes):
                fut = loop.create_future()
                fut.set_result(os.pread(fd, s, 0))
                futs.append(fut)
            await asyncio.gather(*futs)
        await asyncio.sleep(0.001)
    print(json.dumps([time.perf_counter() - t0, cpu() - c0]))

(asyncio.run if shape.endswith("@asyncio") else ringio.run)(main())
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reads", type=int, default=1000)
    ap.add_argument("--files", default="1,6,12,24")
    ap.add_argument("--glibc-defaults", action="store_true",
                    help="let the children give their heap back (glibc's default)")  # fmt: skip
    args = ap.parse_args()
    env = dict(os.environ)
    if not args.glibc_defaults:
        env.update(MALLOC_TRIM_THRESHOLD_=str(256 << 20), MALLOC_TOP_PAD_=str(16 << 20))
    counts = [int(n) for n in args.files.split(",")]
    with tempfile.TemporaryDirectory(prefix="ringio-seed-", dir=os.getcwd()) as root:
        # The bench's files: the same seeded sizes, 1-100 KB.
        rng = random.Random(20190202)
        paths = []
        for i in range(max(counts)):
            p = os.path.join(root, f"small-{i:02d}.bin")
            with open(p, "wb") as f:
                f.write(os.urandom(rng.randint(1000, 100_000)))
            paths.append(p)
        runs: dict[tuple[str, int], list[tuple[float, float]]] = {}
        for _ in range(args.rounds):
            for n in counts:
                for shape in SHAPES:
                    out = subprocess.run(
                        [sys.executable, "-c", CHILD, shape, str(args.reads), *paths[:n]],
                        capture_output=True, text=True, check=True, env=env,
                    )  # fmt: skip
                    wall, cpu = json.loads(out.stdout.strip().splitlines()[-1])
                    runs.setdefault((shape, n), []).append((wall, cpu))
    print(f"{args.reads} rounds 1 ms apart, {args.rounds} runs of each shape in turn; "
          "medians, ratio to open() (min-max of the CPU ratio)")  # fmt: skip
    print("| files | shape | wall s | wall vs open() | CPU ms | CPU vs open() |")
    print("|--:|---|--:|--:|--:|--:|")
    for n in counts:
        base_wall = statistics.median(w for w, _ in runs[("open()", n)])
        base_cpu = statistics.median(c for _, c in runs[("open()", n)])
        for shape in SHAPES:
            walls = [w for w, _ in runs[(shape, n)]]
            cpus = [c for _, c in runs[(shape, n)]]
            w, c = statistics.median(walls), statistics.median(cpus)
            spread = f"{min(cpus) / base_cpu:.2f}-{max(cpus) / base_cpu:.2f}"
            print(f"| {n} | {shape} | {w:.3f} | {w / base_wall:.2f}x | {c * 1e3:.1f} | "
                  f"{c / base_cpu:.2f}x ({spread}) |")  # fmt: skip


if __name__ == "__main__":
    main()
