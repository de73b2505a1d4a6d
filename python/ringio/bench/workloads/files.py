"""``files``: small-file reads (the linux_aio experiment), random-read throughput,
an O_DIRECT ceiling from fio, sequential 1 MiB I/O and line iteration.

Every contender runs in its own child process (``_files_worker``) so the threads,
memory and CPU time reported are its own.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engines import LOOP_SUFFIX, contender_name, select_engines
from ..model import Options, Table, WorkloadResult
from ..worker import run_worker

NAME = "files"
WORKER = "ringio.bench.workloads._files_worker"
# Each table's ratio is against the fastest natural code for its job: the built-in
# open() (`for line in f`, `f.write`, `f.read`), a plain `os.pread` loop for cached
# random reads, fio for O_DIRECT. aiofiles, the library most asyncio code uses for
# files, is a row like any other.
BASELINE = "open()"
PREAD_BASELINE = "os.pread"

# Peer name (as given to --peers) -> the module whose presence means "installed".
PEER_MODULES: dict[str, str | None] = {
    "aiofiles": "aiofiles",
    "aiofile": "aiofile",
    "libaio": "libaio",
    "linux_aio": "linux_aio",
    "open": None,  # the built-in open(): always there
    "fio": None,  # a binary, looked up on PATH
}
# caio's backends, each a contender of its own under aiofile.
CAIO_BACKENDS = ("linux_aio", "thread_aio", "python_aio", "linux_uring")

KiB, MiB = 1024, 1024 * 1024


@dataclass
class Scale:
    """Counts and sizes for one mode (full, quick, smoke)."""

    reads: int  # small-file rounds, one every `interval` seconds
    nfiles: tuple[int, ...]
    rand_ops: int  # ops per queue depth
    depths: tuple[int, ...]
    rand_file: int  # bytes
    direct_depths: tuple[int, ...]
    fio_runtime: int  # seconds per fio job
    seq_total: int  # bytes written then read in 1 MiB chunks
    text_bytes: int
    interval: float = 0.001
    # Cached random reads: the `rand_ops` offsets are read again until this much
    # time has passed (3,000 reads took 10 ms for ringio, 0.5 s for aiofiles).
    rand_seconds: float = 0.0
    # aiofiles and aiofile iterate lines at ~1 MB/s: they stop after this long.
    line_peer_seconds: float = 1e9
    # O_DIRECT reads per run at queue depth 1 and deeper: each run lasts about as
    # long as one fio job (this VM's disk: ~30k reads/s at depth 1, ~130k at 32).
    direct_ops_qd1: int = 64
    direct_ops: int = 64
    # Rounds of fio and every O_DIRECT contender in turn, each reported as its
    # median: the disk's speed drifts by tens of per cent within minutes here, so a
    # contender measured a minute after fio could be compared with another disk.
    direct_rounds: int = 1
    # Rounds of every contender in turn (small files, cached random reads,
    # sequential I/O, lines); each cell is the median of its rounds, with the min
    # and max of the table's metric beside it.
    rounds: int = 1


# glibc gives the top of the heap back to the kernel on free() once more than its
# trim threshold (128 KiB) is free there, and faults it in again at the next
# allocation. A round of the small-files table frees up to 24 objects of 1-100 KB
# together; whether they sat at the top of the heap depends on what the process
# allocated before (its imports), so one contender's CPU time moved by up to 2x
# between otherwise equal runs (2026-11-28: `open()` 98 or 158 µs of CPU a round at
# 12 files, ringio 130 or 207). Every contender of that table runs with its heap
# kept, as a long-running program's is.
KEEP_HEAP = {"MALLOC_TRIM_THRESHOLD_": str(256 << 20), "MALLOC_TOP_PAD_": str(16 << 20)}


FULL = Scale(
    1000, (1, 6, 12, 24), 20000, (1, 8, 64), 64 * MiB, (1, 32), 2, 256 * MiB, 100_000_000,
    direct_ops_qd1=40000, direct_ops=200_000, direct_rounds=5, rand_seconds=1.0, rounds=5,
    line_peer_seconds=10.0,
)  # fmt: skip
QUICK = Scale(
    100, (1, 12), 3000, (1, 8, 64), 16 * MiB, (1, 32), 1, 32 * MiB, 20_000_000,
    direct_ops_qd1=15000, direct_ops=100_000, direct_rounds=3, rand_seconds=0.3, rounds=3,
    line_peer_seconds=2.0,
)  # fmt: skip
SMOKE = Scale(3, (1, 2), 64, (1, 8), 1 * MiB, (1,), 1, 2 * MiB, 20_000)


def scale_for(options: Options) -> Scale:
    return SMOKE if options.smoke else QUICK if options.quick else FULL


def contenders(options: Options) -> list[str]:
    """ringio's engines, then every installed peer the user asked for (notices for others)."""
    names = [contender_name(e) for e in select_engines(options.engines, options.notice)]
    for peer, module in PEER_MODULES.items():
        if not options.wants(peer) or peer == "fio":
            continue
        if module and importlib.util.find_spec(module) is None:
            options.notice(f"peer {peer}: not installed, skipped")
            continue
        if peer == "aiofile":
            names += [f"aiofile[{b}]" for b in CAIO_BACKENDS]
        elif peer == "open":
            names.append("open()")
        else:
            names.append(peer)
    if options.peers:
        for peer in options.peers:
            if peer not in PEER_MODULES:
                options.notice(f"peer {peer}: unknown for this workload, skipped")
    return names


def _direct_contenders(ringio_names: list[str]) -> list[str]:
    """The O_DIRECT table's contenders: each ringio engine (tasks over pread into
    aligned buffers); with the uring engine also on ringio's own loop (the reads
    ride the loop's ring, submitted and reaped by its one io_uring_enter per
    iteration), ringio.open(direct=True) there (`f.pread(4096, offset)`, bytes out
    through an aligned bounce buffer, as a user of the file object writes it) and,
    on both loops, its `f.preadinto(buf, offset)` straight into each task's aligned
    buffer, and
    ringio.open's batch reads, which keep the depth with no task per slot:
    preadinto_many straight into one aligned buffer (fio reads into its own
    buffers too) on both loops, pread_many (bytes out) on ringio's."""
    names = list(ringio_names)
    if "ringio[uring]" in ringio_names:
        names += ["ringio[uring]" + LOOP_SUFFIX, "ringio.open[uring]" + LOOP_SUFFIX]
        by_task = "ringio.open[uring].preadinto"
        names += [by_task, by_task + LOOP_SUFFIX]
        into = "ringio.open[uring].preadinto_many"
        names += [into, into + LOOP_SUFFIX, "ringio.open[uring].pread_many" + LOOP_SUFFIX]
    return names


def make_data(root: Path, scale: Scale) -> dict[str, Any]:
    """Writes the data files once per run; sizes are seeded so runs are comparable."""
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(20190202)
    small = []
    for i in range(max(scale.nfiles)):
        p = root / f"small-{i:02d}.bin"
        p.write_bytes(os.urandom(rng.randint(1 * 1000, 100 * 1000)))
        small.append(str(p))
    rand = root / "random.bin"
    with open(rand, "wb") as f:
        for _ in range(scale.rand_file // MiB or 1):
            f.write(os.urandom(min(MiB, scale.rand_file)))
    text = root / "lines.txt"
    line = "the quick brown fox jumps over the lazy dog, {:>12} times over and over\n"
    with open(text, "w") as f:
        written, n = 0, 0
        while written < scale.text_bytes:
            chunk = "".join(line.format(n + k) for k in range(1000))
            f.write(chunk)
            written += len(chunk)
            n += 1000
    return {"small": small, "rand": str(rand), "text": str(text), "seq": str(root / "seq.bin")}


TMPFS_MAGIC = 0x01021994


def tmpfs_copy(src: str) -> Path | None:
    """A copy of `src` in /dev/shm, where that is a tmpfs; else None."""
    from ... import _core

    base = Path("/dev/shm")
    try:
        fd = os.open(base, os.O_RDONLY)
    except OSError:
        return None
    try:
        if _core.fs_type(fd) != TMPFS_MAGIC:
            return None
    finally:
        os.close(fd)
    dst = base / f"ringio-bench-{os.getpid()}.bin"
    shutil.copyfile(src, dst)
    return dst


def paired_ratios(mine: list[float], base: list[float]) -> dict[str, float]:
    """The median, min and max of the per-round ratios `mine[r] / base[r]` of two
    contenders run in the same rounds: the host's drift between rounds, which moves
    both, cancels out of each ratio. Empty when the lists do not pair up."""
    if not base or len(mine) != len(base) or not all(base):
        return {}
    ratios = [m / b for m, b in zip(mine, base, strict=True)]
    return {
        "paired_ratio": statistics.median(ratios),
        "paired_ratio_min": min(ratios),
        "paired_ratio_max": max(ratios),
    }


def fio_randread(path: str, depth: int, runtime: int) -> float:
    """fio's io_uring engine, O_DIRECT 4 KiB random reads: IOPS (raises on failure)."""
    cmd = [
        "fio", "--name=ceiling", f"--filename={path}", "--ioengine=io_uring", "--direct=1",
        "--rw=randread", "--bs=4k", f"--iodepth={depth}", f"--runtime={runtime}",
        "--time_based", "--output-format=json",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=runtime + 60)
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip().splitlines()
        raise RuntimeError(err[-1] if err else f"exit status {proc.returncode}")
    # fio may print notes before the JSON document.
    doc = json.loads(proc.stdout[proc.stdout.index("{") :])
    return float(doc["jobs"][0]["read"]["iops"])


def run(options: Options) -> WorkloadResult:
    scale = scale_for(options)
    result = WorkloadResult(NAME, parameters={"scale": scale.__dict__.copy()})
    names = contenders(options)
    use_fio = options.wants("fio") and shutil.which("fio") is not None
    if options.wants("fio") and not use_fio:
        options.notice("peer fio: not installed, skipped")

    root = Path(options.workdir or options.out / ".data") / "files"
    ringio_names = [n for n in names if n.startswith("ringio[")]
    direct_names = _direct_contenders(ringio_names)
    # Steps for the progress bar: one per child process or fio job.
    options.progress(
        scale.rounds * (len(names) + ("ringio[uring]" in ringio_names)) * len(scale.nfiles)
        + scale.rounds * len(names)
        + scale.rounds * (len(names) + len(ringio_names) + 1)
        + scale.rounds * (len(ringio_names) + 1)
        + scale.direct_rounds
        * len(scale.direct_depths)
        * (len(direct_names) + (1 if use_fio else 0))
        + 3,  # line iteration: the first three jobs; the rest are added there
        0,
    )
    data = make_data(root, scale)
    failed: set[tuple[str, str]] = set()

    def job(contender: str, spec: dict[str, Any]) -> dict[str, Any] | None:
        env = KEEP_HEAP if spec["kind"] == "small_files" else None
        answer = run_worker(WORKER, {"contender": contender, **spec}, env=env)
        options.progress(0, 1)
        if "skipped" in answer or "error" in answer:
            key = (contender, spec["kind"])
            if key not in failed:  # one notice per contender and experiment kind
                failed.add(key)
                why = answer.get("skipped") or answer.get("error")
                verb = "skipped" if "skipped" in answer else "failed"
                options.notice(f"{contender} ({spec['kind']}): {verb}: {why}")
            return None
        return answer

    def interleaved(
        cells: list[tuple[tuple[Any, ...], str, dict[str, Any]]],
    ) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
        """Runs every (key, contender, spec) cell once per round, all cells in turn
        within a round; a contender that is skipped or fails is not run again.
        Returns each key's answers."""
        answers: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        refused: set[str] = set()
        for _ in range(scale.rounds):
            for key, c, spec in cells:
                if c in refused:
                    options.progress(0, 1)
                elif (a := job(c, spec)) is None:
                    refused.add(c)
                else:
                    answers.setdefault(key, []).append(a)
        return {k: v for k, v in answers.items() if k[0] not in refused}

    def medians(runs: list[dict[str, Any]], metric: str) -> dict[str, Any]:
        """Every figure's median over the rounds, and the metric's min and max."""
        out = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        out[f"{metric}_min"] = min(r[metric] for r in runs)
        out[f"{metric}_max"] = max(r[metric] for r in runs)
        return out

    # 1. The linux_aio experiment.
    t = Table(
        f"{scale.reads} reads of N small files (1-100 KB), one round every "
        f"{scale.interval * 1000:g} ms",
        metric="runtime_s", baseline=BASELINE, higher_is_better=False,
        note="threads: peak of /proc/self/task less io_workers, io_uring's kernel "
        "workers (iou-wrk-*: the kernel runs ops it cannot do inline there, such as "
        "an OPENAT, and they run no user code); RSS/VSZ: VmHWM/VmPeak of /proc/self/status; "
        "CPU: process CPU time / wall time. Each contender in a process of its own, "
        "its heap kept (glibc's MALLOC_TRIM_THRESHOLD_ and MALLOC_TOP_PAD_ set high, "
        "the same for all: glibc's trimming of a fresh process's heap moved a "
        "contender's CPU by up to 2x between runs); "
        f"{scale.rounds} round(s) of every contender in turn, medians (runtime min-max "
        "beside them).",
    )  # fmt: skip
    sizes = [os.path.getsize(p) for p in data["small"]]
    # ringio.open's files on ringio's own loop too: gather(*(f.pread(size, 0) ...))
    # under ringio.run, as a ringio user writes the experiment.
    small_names = names + [n.replace("ringio[", "ringio.open[") + LOOP_SUFFIX
                           for n in ringio_names if n == "ringio[uring]"]  # fmt: skip
    small_cells = [
        ((c, n), c, {"kind": "small_files", "paths": data["small"][:n], "sizes": sizes[:n],
                     "reads": scale.reads, "interval": scale.interval})
        for c in small_names
        for n in scale.nfiles
    ]  # fmt: skip
    for (c, n), runs in interleaved(small_cells).items():
        t.add(c, {"files": n}, **medians(runs, "runtime_s"))
    result.tables.append(t)

    # 2. Cached random reads at several queue depths, in interleaved rounds.
    t = Table(
        f"4 KiB random reads of a cached {scale.rand_file // MiB} MiB file",
        metric="ops_per_s", baseline=PREAD_BASELINE, higher_is_better=True,
        baseline_params={"qd": 1},
        note=(
            "qd: reads in flight (concurrent tasks for asyncio contenders). Every ratio "
            "is against os.pread at qd 1: `for off in offsets: os.pread(fd, 4096, off)` "
            "in one process, the fastest a user reads cached data from Python; open() "
            "is `f.seek(off); f.read(4096)`, both blocking, so qd 1 only. ringio.open: "
            "`await f.pread(4096, off)` in each task's loop. Each contender reads the "
            "same offsets, once untimed, then again until "
            f"{scale.rand_seconds:g} s have passed; {scale.rounds} rounds of every "
            "contender in turn, each cell the median (min-max beside it). cpu_us: the "
            "process's CPU time per read. paired_ratio: the median of each round's "
            "ratio to that round's os.pread (min-max beside it), from which the host's "
            "drift between rounds cancels. in_process_ratio (ringio's rows): the median "
            "over rounds of each round's ratio to os.pread measured inside the "
            "contender's process: the median, over pairs of a pass over the offsets by "
            "the plain loop and one by the contender run in turn (at least 20 pairs and "
            "twice the run's time), of the pair's ratio; passes milliseconds apart see "
            "the same host, where runs seconds apart moved by more than a tenth. Left "
            "out where the process had a second thread, in which glibc's pread costs "
            "more."
        ),
    )  # fmt: skip
    open_names = [n.replace("ringio[", "ringio.open[") for n in ringio_names]
    rand_cells = [
        ((c,), c, {"kind": "rand_read", "path": data["rand"], "block": 4096,
                   "ops": scale.rand_ops,
                   "depths": [1] if c in ("open()", PREAD_BASELINE) else list(scale.depths),
                   "min_seconds": scale.rand_seconds,
                   "pread_in_process": c.startswith("ringio")})
        for c in [PREAD_BASELINE, *names, *open_names]
    ]  # fmt: skip

    def add_per_depth(t: Table, cells: list[tuple[tuple[Any, ...], str, dict[str, Any]]]) -> None:
        """Runs `rand_read` cells; one row per contender and queue depth."""
        answers = interleaved(cells)
        base = [r["ops_per_s"]["1"] for r in answers.get((PREAD_BASELINE,), [])]
        for (c,), runs in answers.items():
            for d in runs[0]["ops_per_s"]:
                per_depth = [
                    {"ops_per_s": r["ops_per_s"][d], "cpu_us": r["cpu_us"][d]} for r in runs
                ]
                mine = [r["ops_per_s"] for r in per_depth]
                pairs = paired_ratios(mine, base) if c != PREAD_BASELINE else {}
                local = [r.get("pread_ratio_in_process", {}).get(d) for r in runs]
                if local and None not in local:
                    pairs["in_process_ratio"] = statistics.median(local)
                    pairs["in_process_ratio_min"] = min(local)
                    pairs["in_process_ratio_max"] = max(local)
                t.add(c, {"qd": int(d)}, **medians(per_depth, "ops_per_s"), **pairs)
        result.tables.append(t)

    add_per_depth(t, rand_cells)

    # 2b. The same reads of a file on tmpfs: memory, not a device's page cache.
    shm_names = [PREAD_BASELINE, *open_names]
    shm = tmpfs_copy(data["rand"])
    if shm is None:
        options.notice("tmpfs reads: /dev/shm is not a tmpfs here, skipped")
        options.progress(0, scale.rounds * len(shm_names))
    else:
        t = Table(
            f"4 KiB random reads of a {scale.rand_file // MiB} MiB file on tmpfs (/dev/shm)",
            metric="ops_per_s", baseline=PREAD_BASELINE, higher_is_better=True,
            baseline_params={"qd": 1},
            note=(
                "The table above's reads (same offsets, same method), of a copy of its "
                "file in /dev/shm, as on a /tmp that is tmpfs. tmpfs refuses "
                "preadv2(RWF_NOWAIT) (EOPNOTSUPP, Linux 6.18) and io_uring hands each of "
                "its reads to a kernel worker thread; ringio reads its regular files "
                "inline with a plain preadv2."
            ),
        )  # fmt: skip
        shm_cells = [
            ((c,), c, {**spec, "path": str(shm)})
            for (c,), _, spec in rand_cells
            if c in shm_names
        ]  # fmt: skip
        try:
            add_per_depth(t, shm_cells)
        finally:
            shm.unlink()

    # 3. O_DIRECT random reads: ringio against fio's io_uring engine as the ceiling.
    t = Table(
        "4 KiB O_DIRECT random reads (no page cache)",
        metric="ops_per_s", baseline="fio io_uring", higher_is_better=True,
        note=(
            "fio --ioengine=io_uring --direct=1 --rw=randread --bs=4k on the same file. "
            f"{scale.direct_rounds} rounds of fio and every contender in turn; each "
            "cell is the median of its rounds (min and max beside it): the disk's "
            "speed drifts between rounds. paired_ratio: the median of each round's "
            "ratio to that round's fio run (min and max beside it), from which the "
            "drift cancels. "
            "ringio[...] and ringio.open[...]: `depth` tasks, each awaiting one read at a "
            "time (the engine into one aligned buffer per task; ringio.open's pread "
            "returns bytes; its .preadinto reads straight into one aligned buffer per "
            "task, `await f.preadinto(buf, offset)`). .preadinto_many / .pread_many: one "
            "call per 4,096 offsets keeping `depth` reads in flight, into one aligned "
            "buffer (as fio reads into its own) or into bytes objects that the call "
            "returns, i.e. 16 MiB of new memory per call to allocate and fault in."
        ),
    )  # fmt: skip
    rates: dict[tuple[str, int], list[float]] = {}
    refused: set[str] = set()  # skipped or failed in a round: not run again
    for _ in range(scale.direct_rounds):
        for d in scale.direct_depths:
            if not use_fio:
                break
            try:
                rate = fio_randread(data["rand"], d, scale.fio_runtime)
                rates.setdefault(("fio io_uring", d), []).append(rate)
            except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as exc:
                options.notice(f"fio io_uring qd {d}: failed: {exc}")
                use_fio = False
            options.progress(0, 1)
        for c in direct_names:
            for d in scale.direct_depths:
                if c in refused:
                    options.progress(0, 1)
                    continue
                ops = scale.direct_ops_qd1 if d == 1 else scale.direct_ops
                spec = {"kind": "rand_read", "path": data["rand"], "block": 4096,
                        "direct": True, "ops": ops, "depths": [d]}  # fmt: skip
                if (a := job(c, spec)) is None:
                    refused.add(c)
                else:
                    rates.setdefault((c, d), []).append(a["ops_per_s"][str(d)])
    for (c, d), runs in rates.items():
        if c not in refused:
            fio = rates.get(("fio io_uring", d), []) if c != "fio io_uring" else []
            t.add(c, {"qd": d}, ops_per_s=statistics.median(runs), ops_per_s_min=min(runs),
                  ops_per_s_max=max(runs), **paired_ratios(runs, fio))  # fmt: skip
    result.tables.append(t)

    # 4. Sequential 1 MiB writes (with the final fsync) and reads.
    t = Table(
        f"sequential 1 MiB I/O, {scale.seq_total // MiB} MiB",
        metric="mb_s", baseline=BASELINE, higher_is_better=True,
        note="write: 1 MiB writes then fsync, timed together; read: the same file, cached. "
        f"{scale.rounds} round(s) of every contender in turn, medians (min-max beside them).",
    )  # fmt: skip
    seq_cells = [
        ((c,), c, {"kind": "sequential", "path": data["seq"], "chunk": MiB,
                   "total": scale.seq_total})
        for c in names
    ]  # fmt: skip
    for (c,), runs in interleaved(seq_cells).items():
        for op in ("write", "read"):
            figures = medians([{"mb_s": r[f"{op}_mb_s"]} for r in runs], "mb_s")
            t.add(c, {"op": op}, **figures)
    result.tables.append(t)

    # 5. Line iteration over a text file, opened as text ('r') and binary ('rb').
    t = Table(
        f"line iteration over a {scale.text_bytes / 1e6:g} MB text file",
        metric="lines_per_s", baseline=BASELINE, higher_is_better=True,
        note="open(): `for line in f`; aiofiles and ringio.open: `async for line in f`; "
        "aiofile: `async for line in LineReader(afp)` (text only). Mode r: the locale's "
        "encoding (UTF-8), universal newlines; rb: bytes. Timed from the open to the "
        "close (an asyncio contender's loop, and ringio's engine that comes with it, "
        "made before); open() and ringio.open repeat whole passes (open, every line, "
        f"close) until {scale.rand_seconds:g} s have passed, the first included; "
        f"aiofiles and aiofile stop after {scale.line_peer_seconds:g} s (their "
        f"rates are over the lines read by then). {scale.rounds} round(s) of every "
        "contender in turn, medians (min-max beside them).",
    )  # fmt: skip
    line_contenders = [c for c in names if c in ("open()", "aiofiles", "aiofile[linux_aio]")]
    line_contenders += [n.replace("ringio[", "ringio.open[") for n in ringio_names]
    line_jobs = [(m, c) for m in ("r", "rb") for c in line_contenders
                 if m == "r" or not c.startswith("aiofile[")]  # fmt: skip
    options.progress(scale.rounds * len(line_jobs) - 3, 0)
    line_cells = [
        ((c, mode), c, {"kind": "lines", "path": data["text"], "mode": mode,
                        "peer_seconds": scale.line_peer_seconds,
                        "min_seconds": scale.rand_seconds})
        for mode, c in line_jobs
    ]  # fmt: skip
    for (c, mode), runs in interleaved(line_cells).items():
        t.add(c, {"mode": mode}, **medians(runs, "lines_per_s"))
    result.tables.append(t)

    # 6. Small sequential reads through the file's position, cached.
    t = Table(
        f"4 KiB sequential reads of a cached {scale.rand_file // MiB} MiB file",
        metric="ops_per_s", baseline="open()", higher_is_better=True,
        baseline_params={"op": "read"},
        note=(
            "open(): `while f.read(4096): pass` (op read) and `while f.readinto(buf): "
            "pass` (op readinto), buffered, blocking: the plain synchronous loop; "
            "aiofiles and ringio.open: the same with `await`. The file is opened once; "
            "every pass seeks to 0 and reads to the end, passes repeated until "
            f"{scale.rand_seconds:g} s have passed, after one untimed pass. Ratios "
            "against open()'s read. "
            f"{scale.rounds} round(s) of every contender in turn, medians (min-max beside "
            "them); cpu_us: the process's CPU time per read."
        ),
    )  # fmt: skip
    seq_contenders = [c for c in names if c in ("open()", "aiofiles")]
    seq_contenders += [n.replace("ringio[", "ringio.open[") for n in ringio_names]
    options.progress(scale.rounds * len(seq_contenders), 0)
    small_seq_cells = [
        ((c,), c, {"kind": "small_seq", "path": data["rand"], "block": 4096,
                   "min_seconds": scale.rand_seconds})
        for c in seq_contenders
    ]  # fmt: skip
    for (c,), runs in interleaved(small_seq_cells).items():
        for op in ("read", "readinto"):
            per_op = [{"ops_per_s": r["ops_per_s"][op], "cpu_us": r["cpu_us"][op]} for r in runs]
            t.add(c, {"op": op}, **medians(per_op, "ops_per_s"))
    result.tables.append(t)

    shutil.rmtree(root, ignore_errors=True)
    return result
