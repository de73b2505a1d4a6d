"""``http``: uvicorn (httptools) and aiohttp ``web`` apps on ringio's loop, uvloop,
rloop, zuvloop and rsloop (CPython 3.14) and asyncio's own loop, driven by wrk with
keep-alive.

Each framework serves ``/`` ("Hello, world!"), ``/json`` (10 KiB of JSON,
serialised per request) and ``/file`` (a 1 MiB file, as its users serve one: aiohttp's
``web.FileResponse``, Starlette's ``FileResponse`` under uvicorn) from
``bench/servers/http_server.py``; the loop is given
as a factory, as uvicorn's ``--loop ringio:new_event_loop`` (uvicorn 0.36+) and
aiohttp's ``web.run_app(loop=...)`` take it. Every (framework, loop) server runs
once per round, every loop in turn within a round, so drifts of the shared machine
fall on all of them alike; each cell is the median of its rounds. wrk runs one
thread; the server and wrk share CPU 0 ("one CPU", as in the ``loop`` workload),
or (full mode, also) sit on CPUs 0 and 1 ("two CPUs").
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..model import Options, Table, WorkloadResult
from ..netpeers import process_cpu, repo_root

NAME = "http"
# Contender -> loop factory.
LOOPS = {
    "ringio": "ringio:new_event_loop",
    "uvloop": "uvloop:new_event_loop",
    "rloop": "rloop:new_event_loop",
    # CPython 3.14 only (`make bench-py VERSION=3.14`): skipped where not installed.
    "zuvloop": "zuvloop:new_event_loop",
    "rsloop": "rsloop:new_event_loop",
    "asyncio": "asyncio:new_event_loop",
}
FRAMEWORKS = {"uvicorn": ("uvicorn", "httptools"), "aiohttp": ("aiohttp",)}
ROUTES = {"hello": "/", "json": "/json", "file": "/file"}
# Routes that need a module beyond the framework's: uvicorn serves files through
# Starlette (its FileResponse: what a uvicorn user writes).
ROUTE_MODULES = {("uvicorn", "file"): "starlette"}
FILE_SIZE = 1 << 20
BASELINE = "uvloop"
# Placement name -> (server CPUs, wrk CPUs).
PLACEMENTS = {"one CPU": ({0}, {0}), "two CPUs": ({0}, {1})}


def _have(*modules: str) -> str | None:
    """None when every module is importable, else the first missing one."""
    for m in modules:
        if importlib.util.find_spec(m) is None:
            return m
    return None


def _pin(cpus: set[int]) -> Any:
    def pin() -> None:  # in the child, between fork and exec
        os.sched_setaffinity(0, cpus)

    return pin


def start_server(
    framework: str, factory: str, cpus: set[int], file: Path | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    """Starts bench/servers/http_server.py (serving `file` at ``/file``); returns it
    and its port (raises RuntimeError when it does not come up)."""
    script = repo_root() / "bench" / "servers" / "http_server.py"
    cmd = [sys.executable, str(script), "--framework", framework, "--loop-factory", factory,
           "--duration", "900"]  # fmt: skip
    if file is not None:
        cmd += ["--file", str(file)]
    return spawn_server(cmd, cpus)


def spawn_server(cmd: list[str], cpus: set[int]) -> tuple[subprocess.Popen[bytes], int]:
    """Runs `cmd` pinned to `cpus`; returns it and the port it prints on its first
    line (raises RuntimeError with its last line of stderr when it prints none).

    stderr goes to an unnamed file, not a pipe: nobody reads the server's stderr
    while it serves, and a server that logs much (aiohttp on rloop or rsloop on
    CPython 3.14: a traceback per request task whose connection wrk closed, 1 MB
    over three 1,000-connection runs) stopped once a pipe's 64 KiB were full."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
            preexec_fn=_pin(cpus),
        )  # fmt: skip
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the server prints its port once it serves
        try:
            return proc, int(line)
        except ValueError:
            stop_server(proc)
            err.seek(0)
            text = err.read().decode(errors="replace").strip()
            raise RuntimeError(text.splitlines()[-1] if text else "no port") from None


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


_UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6}


def _us(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if not m:
        raise ValueError(f"not a wrk duration: {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_wrk(out: str) -> dict[str, float]:
    """req/s, p50/p99 latency (µs), requests, and errors from wrk --latency output."""
    figures: dict[str, float] = {}
    if m := re.search(r"Requests/sec:\s+([\d.]+)", out):
        figures["req_per_s"] = float(m.group(1))
    if m := re.search(r"(\d+) requests in", out):
        figures["requests"] = int(m.group(1))
    for pct in ("50", "99"):
        if m := re.search(rf"^\s+{pct}%\s+(\S+)", out, re.M):
            figures[f"p{pct}_us"] = _us(m.group(1))
    errors = 0
    socket_errors = r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)"
    if m := re.search(socket_errors, out):
        errors += sum(int(g) for g in m.groups())
    if m := re.search(r"Non-2xx or 3xx responses: (\d+)", out):
        errors += int(m.group(1))
    figures["errors"] = errors
    if "req_per_s" not in figures:
        raise ValueError(f"wrk printed no rate: {out.strip()[-300:]!r}")
    return figures


def run_wrk(port: int, path: str, conns: int, seconds: int, cpus: set[int]) -> dict[str, float]:
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--latency", "--timeout", "5s",
           f"http://127.0.0.1:{port}{path}"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30,
                          preexec_fn=_pin(cpus))  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"wrk exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return parse_wrk(proc.stdout)


def run(options: Options) -> WorkloadResult:
    if options.smoke:
        conns, seconds, rounds, placements = (4,), 1, 1, ("one CPU",)
    elif options.quick:
        # Both placements: with one connection they differ most (on two CPUs the
        # server sleeps between requests and each one costs a cross-CPU wake-up).
        conns, seconds, rounds, placements = (1, 100), 1, 2, tuple(PLACEMENTS)
    else:
        conns, seconds, rounds, placements = (1, 10, 100, 1000), 2, 3, tuple(PLACEMENTS)
    parameters = {"connections": conns, "seconds": seconds, "rounds": rounds,
                  "placements": placements}  # fmt: skip
    result = WorkloadResult(NAME, parameters=parameters)
    if shutil.which("wrk") is None:
        options.notice("wrk not installed (Debian package wrk): workload skipped")
        return result
    if len(os.sched_getaffinity(0)) < 2:
        placements = tuple(p for p in placements if p == "one CPU")
    loops = {}
    for name, factory in LOOPS.items():
        if name != "ringio" and not options.wants(name):
            continue
        if (missing := _have(factory.split(":")[0])) is not None:
            options.notice(f"peer {name}: {missing} not installed, skipped")
            continue
        loops[name] = factory
    frameworks = {}
    for fw, modules in FRAMEWORKS.items():
        if (missing := _have(*modules)) is not None:
            options.notice(f"{fw}: {missing} not installed, skipped")
        else:
            frameworks[fw] = modules
    routes = {}
    for fw in frameworks:
        for route, path in ROUTES.items():
            needs = ROUTE_MODULES.get((fw, route))
            if needs is not None and _have(needs) is not None:
                options.notice(f"{fw}, {route}: {needs} not installed, skipped")
            else:
                routes[(fw, route)] = path
    # The file /file serves: in the page cache after the first request, so the
    # cells measure the loops and the frameworks' file paths, not the disk.
    data_dir = Path(options.workdir or options.out / ".data") / "http"
    data_dir.mkdir(parents=True, exist_ok=True)
    served = data_dir / "file-1MiB.bin"
    if not served.exists() or served.stat().st_size != FILE_SIZE:
        served.write_bytes(os.urandom(FILE_SIZE))
    note = (
        f"wrk -t1 -cN -d{seconds}s, keep-alive; {rounds} round(s), every loop in "
        "turn per round, medians (min-max beside them); one untimed wrk second "
        "per server first. p50/p99: wrk's latency percentiles in µs. server_us: "
        "the server's CPU time per request (user + kernel, from /proc). one CPU: "
        "server and wrk pinned to CPU 0; two CPUs: server on 0, wrk on 1."
    )
    tables = {
        (fw, route): Table(
            f"{fw}, {route} (GET {path})",
            metric="req_per_s",
            baseline=BASELINE,
            higher_is_better=True,
            note=note,
        )
        for (fw, route), path in routes.items()
    }
    cells: dict[tuple[str, str, str, str, int], list[dict[str, float]]] = {}
    options.progress(rounds * len(placements) * len(frameworks) * len(loops), 0)
    failed: set[tuple[str, str]] = set()
    for _ in range(rounds):
        for placement in placements:
            server_cpus, client_cpus = PLACEMENTS[placement]
            for fw in frameworks:
                for loop, factory in loops.items():
                    if (fw, loop) in failed:
                        options.progress(0, 1)
                        continue
                    try:
                        proc, port = start_server(fw, factory, server_cpus, served)
                    except RuntimeError as exc:
                        failed.add((fw, loop))
                        options.notice(f"{fw} on {loop}: server failed: {exc}")
                        options.progress(0, 1)
                        continue
                    try:
                        run_wrk(port, "/", 10, 1, client_cpus)  # warm-up
                        for route, path in ROUTES.items():
                            if (fw, route) not in routes:
                                continue
                            for n in conns:
                                before = process_cpu(proc.pid)
                                figures = run_wrk(port, path, n, seconds, client_cpus)
                                after = process_cpu(proc.pid)
                                if before and after and figures.get("requests"):
                                    cpu = sum(after) - sum(before)
                                    figures["server_us"] = cpu * 1e6 / figures["requests"]
                                cells.setdefault((fw, route, loop, placement, n), []).append(
                                    figures
                                )
                    except (RuntimeError, ValueError, subprocess.SubprocessError) as exc:
                        failed.add((fw, loop))
                        options.notice(f"{fw} on {loop}: {exc}")
                    finally:
                        stop_server(proc)
                        options.progress(0, 1)
                    time.sleep(0.2)  # let the closed connections' TIME_WAIT settle
    for (fw, route, loop, placement, n), runs in cells.items():
        if (fw, loop) in failed:
            continue
        rates = [r["req_per_s"] for r in runs]

        def med(key: str, runs: list[dict[str, float]] = runs) -> float | None:
            values = [r[key] for r in runs if key in r]
            return statistics.median(values) if values else None

        tables[(fw, route)].add(
            loop, {"placement": placement, "connections": n},
            req_per_s=statistics.median(rates), req_per_s_min=min(rates),
            req_per_s_max=max(rates), p50_us=med("p50_us"), p99_us=med("p99_us"),
            server_us=med("server_us"), errors=max(r["errors"] for r in runs),
        )  # fmt: skip
    result.tables.extend(t for t in tables.values())
    return result
