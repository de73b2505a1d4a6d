"""``vectored``: COUNT separate calls vs one vectored call (the vectored-I/O experiment).

SIZE 1024 x COUNT 1000 and SIZE 102400 x COUNT 10; writes (with fsync) and reads;
the buffer-list set-up inside and outside the timed part; median over the repeats.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from ..engines import contender_name, select_engines
from ..model import Options, Table, WorkloadResult
from ..worker import run_worker

NAME = "vectored"
WORKER = "ringio.bench.workloads._vectored_worker"
SHAPES = [(1024, 1000), (102400, 10)]  # (SIZE, COUNT): 1 MB either way
PEERS = ("os", "aiofiles")


def run(options: Options) -> WorkloadResult:
    repeats = 1 if options.smoke else 3 if options.quick else 10
    shapes = [(1024, 50), (4096, 4)] if options.smoke else SHAPES
    result = WorkloadResult(NAME, parameters={"repeats": repeats, "shapes": shapes})
    engines = select_engines(options.engines, options.notice)
    if options.peers:
        for peer in options.peers:
            if peer not in PEERS:
                options.notice(f"peer {peer}: unknown for this workload, skipped")

    sync_names = [f"{contender_name(e)}.Context" for e in engines]
    async_names = [contender_name(e) for e in engines]
    if options.wants("os"):
        # The fastest a coroutine can do it too: blocking os.writev/os.readv calls.
        sync_names.insert(0, "os")
        async_names.insert(0, "os")
    if options.wants("aiofiles"):
        if importlib.util.find_spec("aiofiles") is None:
            options.notice("peer aiofiles: not installed, skipped")
        else:
            async_names.append("aiofiles")

    tables = [
        Table(
            "synchronous: COUNT pwrite/pread vs one writev/readv",
            metric="vectored_mb_s", baseline="os", higher_is_better=True,
            note="os: os.pwrite/os.pread loop vs os.writev/os.readv; ringio[aio].Context: COUNT "
            "pwrite/pread ops in one submit vs one pwritev/preadv op. Writes include fsync.",
        ),
        Table(
            "asyncio: per-buffer awaits vs one vectored await",
            metric="vectored_mb_s", baseline="os", higher_is_better=True,
            note="os: the blocking os.writev/os.readv a coroutine can call (the same run "
            "as in the synchronous table); "
            "ringio[aio]: `await write/read` per buffer vs `await writev/readv`; aiofiles "
            "(no vectored call): per-buffer `await f.write/read` vs join + one write / one "
            "read. Writes include fsync.",
        ),
    ]  # fmt: skip
    root = Path(options.workdir or options.out / ".data") / "vectored"
    root.mkdir(parents=True, exist_ok=True)
    path = root / "vectored.bin"
    answers: dict[str, dict[str, Any]] = {}  # "os" is measured once for both tables
    options.progress(len(set(sync_names) | set(async_names)), 0)
    for table, names in zip(tables, (sync_names, async_names), strict=True):
        for name in names:
            if name not in answers:
                spec = {"kind": "measure", "contender": name, "path": str(path),
                        "repeats": repeats, "shapes": shapes}  # fmt: skip
                answers[name] = run_worker(WORKER, spec)
                options.progress(0, 1)
            answer = answers[name]
            if "points" not in answer:
                verb = "skipped" if "skipped" in answer else "failed"
                options.notice(f"{name}: {verb}: {answer.get('skipped') or answer.get('error')}")
                continue
            for p in answer["points"]:
                table.add(
                    name,
                    {"size": p["size"], "count": p["count"], "op": p["op"], "setup": p["setup"]},
                    separate_mb_s=p["separate_mb_s"],
                    vectored_mb_s=p["vectored_mb_s"],
                    vectored_over_separate=p["vectored_over_separate"],
                )
        result.tables.append(table)
    path.unlink(missing_ok=True)
    return result
