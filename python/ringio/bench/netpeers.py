"""Networking benchmark peers: build them, run them, return plain dicts of figures.

The peers live outside the Python package, in the repository's ``bench/`` tree:

* ``bench/peers/gaio``: a Go program running github.com/xtaci/gaio's own echo
  benchmarks (``echo64k``, ``conns``, ``idle``) and printing one JSON object;
* ``bench/client/echoclient.c``: a closed-loop epoll echo client in C printing
  one JSON line (req/s, MB/s, latency percentiles);
* ``bench/servers/echo_server.py``: vmbench-style asyncio echo servers
  (``sockets``, ``streams``, ``protocol``) on a selectable event loop.

Nothing here raises because a tool is missing: every function returns a dict
(or a list of dicts) and reports what it could not do as ``{"skipped": reason}``
or ``{"error": message}``. All traffic stays on 127.0.0.1 and every subprocess
runs under a timeout.
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

__all__ = [
    "GAIO_CASES",
    "available_loops",
    "build_peers",
    "repo_root",
    "run_echo_client",
    "run_echo_matrix",
    "run_gaio",
    "start_echo_server",
]

GAIO_CASES = ("echo64k", "conns", "idle", "all")
HOST = "127.0.0.1"


def repo_root() -> Path:
    """The repository holding ``bench/`` (this file is python/ringio/bench/netpeers.py)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "bench" / "servers" / "echo_server.py").is_file():
            return parent
    return here.parents[3]


def _default_build_dir() -> Path:
    return repo_root() / "bench" / "build"


def _newer_than(target: Path, sources: Iterable[Path]) -> bool:
    """True when target exists and is at least as new as every source."""
    if not target.is_file():
        return False
    mtime = target.stat().st_mtime
    return all(not src.exists() or src.stat().st_mtime <= mtime for src in sources)


def _tail(text: str | bytes | None, limit: int = 2000) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return text.strip()[-limit:]


# ---------------------------------------------------------------------- build


def _build_gaio(build_dir: Path) -> dict[str, Any]:
    src = repo_root() / "bench" / "peers" / "gaio"
    out = build_dir / "gaiobench"
    if not (src / "main.go").is_file():
        return {"skipped": f"gaio sources not found in {src}"}
    go = shutil.which("go")
    if go is None:
        return {"skipped": "go not found on PATH"}
    sources = [src / "main.go", src / "go.mod", src / "go.sum"]
    if _newer_than(out, sources):
        return {"path": str(out), "cached": True}
    try:
        proc = subprocess.run(
            [go, "build", "-o", str(out), "."],
            cwd=src,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return {"skipped": f"go build failed: {exc}"}
    if proc.returncode != 0 or not out.is_file():
        return {"skipped": "go build failed", "error": _tail(proc.stderr)}
    return {"path": str(out), "cached": False}


def _build_echoclient(build_dir: Path) -> dict[str, Any]:
    src = repo_root() / "bench" / "client" / "echoclient.c"
    out = build_dir / "echoclient"
    if not src.is_file():
        return {"skipped": f"echo client source not found: {src}"}
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        return {"skipped": "gcc not found on PATH"}
    if _newer_than(out, [src]):
        return {"path": str(out), "cached": True}
    cmd = [cc, "-O2", "-Wall", "-Wextra", "-o", str(out), str(src), "-pthread"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return {"skipped": f"C build failed: {exc}"}
    if proc.returncode != 0 or not out.is_file():
        return {"skipped": "C build failed", "error": _tail(proc.stderr)}
    return {"path": str(out), "cached": False}


def build_peers(build_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Compile the Go (gaio) and C (echo client) peers into ``build_dir``.

    Builds are cached: a binary newer than its sources is reused. Returns
    ``{"build_dir": ..., "gaio": {...}, "echoclient": {...}}`` where each entry
    is ``{"path": ..., "cached": bool}`` or ``{"skipped": reason}``.
    """
    bdir = Path(build_dir) if build_dir is not None else _default_build_dir()
    try:
        bdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = f"cannot create build dir {bdir}: {exc}"
        return {
            "build_dir": str(bdir),
            "gaio": {"skipped": reason},
            "echoclient": {"skipped": reason},
        }
    return {
        "build_dir": str(bdir),
        "gaio": _build_gaio(bdir),
        "echoclient": _build_echoclient(bdir),
    }


# ---------------------------------------------------------------------- gaio


def run_gaio(
    case: str,
    quick: bool = True,
    *,
    server: str = "gaio",
    build_dir: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    extra_args: Sequence[str] = (),
) -> dict[str, Any]:
    """Run one gaio benchmark case (``echo64k``, ``conns``, ``idle`` or ``all``).

    ``server`` is ``gaio`` (a gaio Watcher echo loop) or ``net`` (plain Go net,
    a goroutine per connection). Returns the case's figures (for ``all``: a
    dict of the three) plus ``tool``, ``gaio_version``, ``go_version``,
    ``server`` and ``quick``; ``{"skipped": ...}`` without Go, ``{"error": ...}``
    when the program fails or times out (it has its own hard timeout too).
    """
    if case not in GAIO_CASES:
        return {"case": case, "error": f"unknown gaio case {case!r}; one of {GAIO_CASES}"}
    built = build_peers(build_dir)["gaio"]
    if "path" not in built:
        return {"case": case, **built}
    inner = 30.0 if quick else 120.0
    if timeout is not None:
        inner = timeout
    cmd = [built["path"], "-case", case, "-server", server, "-timeout", f"{inner}s"]
    if quick:
        cmd.append("-quick")
    cmd.extend(extra_args)
    # the program stops itself after `inner` seconds (per case); this is the backstop
    outer = inner * (3 if case == "all" else 1) + 15.0
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=outer, check=False)
    except subprocess.TimeoutExpired:
        return {"case": case, "server": server, "error": f"gaiobench timed out after {outer}s"}
    except OSError as exc:
        return {"case": case, "server": server, "error": str(exc)}
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {
            "case": case,
            "server": server,
            "error": f"gaiobench exited {proc.returncode} without JSON",
            "stderr": _tail(proc.stderr),
        }
    if not data.get("ok"):
        return {
            "case": case,
            "server": server,
            "error": data.get("error", "failed"),
            "returncode": proc.returncode,
        }
    meta = {
        k: data.get(k)
        for k in ("tool", "gaio_version", "go_version", "gomaxprocs", "server", "quick")
    }
    results = data.get("results", {})
    figures = results if case == "all" else results.get(case, {})
    return {"case": case, **meta, **figures}


# ---------------------------------------------------------------------- echo


def _loop_spec(loop: str) -> tuple[list[str], str | None]:
    """Server arguments for a loop name; ``module:callable`` means a loop factory."""
    if ":" in loop:
        module = loop.split(":", 1)[0]
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        return (["--loop-factory", loop], None if found else f"module {module} not importable")
    if loop == "asyncio":
        return (["--loop", "asyncio"], None)
    if loop == "uvloop":
        if importlib.util.find_spec("uvloop") is None:
            return (["--loop", "uvloop"], "uvloop not installed")
        return (["--loop", "uvloop"], None)
    return ([], f"unknown loop {loop!r}")


def available_loops(loops: Iterable[str] = ("asyncio", "uvloop")) -> list[str]:
    """The subset of ``loops`` that can be run here."""
    return [lp for lp in loops if _loop_spec(lp)[1] is None]


def _cpu_placement(pin_cpu: int | None) -> tuple[set[int] | None, str]:
    if pin_cpu is None:
        return None, "unpinned"
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return None, "unpinned: sched_getaffinity unavailable"
    if pin_cpu not in allowed:
        return None, f"unpinned: cpu {pin_cpu} not in allowed set {sorted(allowed)}"
    return {pin_cpu}, f"server and client pinned to cpu {pin_cpu}"


def _preexec_pin(cpus: set[int] | None):
    if cpus is None:
        return None

    def pin() -> None:  # runs in the child between fork and exec
        os.sched_setaffinity(0, cpus)

    return pin


def _affinity_of(pid: int) -> list[int] | None:
    try:
        return sorted(os.sched_getaffinity(pid))
    except (AttributeError, OSError):
        return None


class EchoServer:
    """A running ``bench/servers/echo_server.py`` subprocess (see start_echo_server)."""

    def __init__(
        self, proc: subprocess.Popen[bytes], port: int, cmd: list[str], log: IO[bytes]
    ) -> None:
        self.proc = proc
        self.port = port
        self.cmd = cmd
        self.log = log  # the server's stderr (a temporary file: a pipe could fill up)

    def stderr_text(self) -> str:
        try:
            self.log.seek(0)
            return _tail(self.log.read())
        except (OSError, ValueError):
            return ""

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode

    def close(self) -> None:
        self.stop()
        self.log.close()

    def __enter__(self) -> EchoServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_echo_server(
    flavour: str,
    loop: str = "asyncio",
    *,
    python: str | None = None,
    cpus: set[int] | None = None,
    max_seconds: float = 600.0,
    ready_timeout: float = 15.0,
    extra_args: Sequence[str] = (),
) -> EchoServer:
    """Start an echo server on 127.0.0.1:0 and wait for its port.

    The server exits by itself after ``max_seconds`` even if nobody stops it.
    Raises RuntimeError when it cannot start (the matrix turns that into an
    error entry).
    """
    script = repo_root() / "bench" / "servers" / "echo_server.py"
    if not script.is_file():
        raise RuntimeError(f"echo server not found: {script}")
    loop_args, why = _loop_spec(loop)
    if why is not None:
        raise RuntimeError(why)
    cmd = [
        python or sys.executable,
        str(script),
        "--flavour",
        flavour,
        *loop_args,
        "--host",
        HOST,
        "--duration",
        str(max_seconds),
        *extra_args,
    ]
    log = tempfile.TemporaryFile()
    try:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            preexec_fn=_preexec_pin(cpus),
        )
    except OSError:
        log.close()
        raise
    assert proc.stdout is not None
    deadline = time.monotonic() + ready_timeout
    line = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            line = proc.stdout.readline()
            break
        if proc.poll() is not None:
            break
    try:
        port = int(line.strip())
    except ValueError:
        server = EchoServer(proc, 0, cmd, log)
        server.stop()
        err = server.stderr_text()
        log.close()
        raise RuntimeError(
            f"echo server ({flavour}, {loop}) did not report a port: {err or line!r}"
        ) from None
    return EchoServer(proc, port, cmd, log)


def run_echo_client(
    port: int,
    size: int,
    concurrency: int,
    duration: float,
    warmup: float,
    *,
    client: str | None = None,
    cpus: set[int] | None = None,
    host: str = HOST,
    threads: int = 1,
) -> dict[str, Any]:
    """One run of the C echo client; its JSON line as a dict (or an error dict)."""
    if client is None:
        built = build_peers()["echoclient"]
        if "path" not in built:
            return built
        client = built["path"]
    cmd = [
        client,
        "--host",
        host,
        "--port",
        str(port),
        "--size",
        str(size),
        "--concurrency",
        str(concurrency),
        "--duration",
        str(duration),
        "--warmup",
        str(warmup),
        "--threads",
        str(threads),
    ]
    limit = duration + warmup + 30.0
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=limit,
            check=False,
            preexec_fn=_preexec_pin(cpus),
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"echo client timed out after {limit}s"}
    except OSError as exc:
        return {"ok": False, "error": str(exc)}
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {
            "ok": False,
            "error": f"echo client exited {proc.returncode} without JSON",
            "stderr": _tail(proc.stderr),
        }
    data["returncode"] = proc.returncode
    return data


def process_cpu(pid: int) -> tuple[float, float] | None:
    """(user, kernel) CPU seconds of process `pid`; None if /proc cannot say."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def children_cpu() -> float:
    """CPU seconds of the child processes waited for so far (the C clients)."""
    t = os.times()
    return t.children_user + t.children_system


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def run_echo_matrix(
    loops: Sequence[str] = ("asyncio", "uvloop"),
    flavours: Sequence[str] = ("sockets", "streams", "protocol"),
    sizes: Sequence[int] = (1024, 10240, 102400),
    concurrency: Sequence[int] = (1, 10, 100, 1000),
    quick: bool = True,
    pin_cpu: int | None = 0,
    *,
    rounds: int | None = None,
    duration: float | None = None,
    warmup: float | None = None,
    build_dir: str | os.PathLike[str] | None = None,
    python: str | None = None,
) -> list[dict[str, Any]]:
    """Echo benchmark matrix: every loop x flavour x size x concurrency.

    For each (loop, flavour) one server subprocess is started; for each size and
    concurrency the C client first runs a warm-up round, then ``rounds`` measured
    rounds of ``duration`` seconds (each with a short warm-up of its own), and
    the medians across rounds are reported. The server is killed afterwards.

    ``quick`` keeps 1 KiB x 100 connections (or the first size/concurrency
    given when those are absent), 3 rounds of 1 s: all flavours on both loops in
    about half a minute. Full mode: 5 rounds of 3 s.

    ``pin_cpu`` pins server and client to that one CPU (``None``: no pinning);
    on a 2-vCPU machine this gives the stable figure. The placement is recorded
    in each result. A loop written ``module:callable`` is passed to the server
    as ``--loop-factory`` (that is how ringio's own loop plugs in).
    """
    if quick:
        sizes = (1024,) if 1024 in sizes else tuple(sizes[:1])
        concurrency = (100,) if 100 in concurrency else tuple(concurrency[:1])
    n_rounds = rounds if rounds is not None else (3 if quick else 5)
    round_s = duration if duration is not None else (1.0 if quick else 3.0)
    warm_s = warmup if warmup is not None else (0.5 if quick else 1.0)
    per_round_warm = min(0.2, warm_s)

    built = build_peers(build_dir)["echoclient"]
    if "path" not in built:
        return [{"skipped": built.get("skipped", "echo client unavailable"), **built}]
    client = built["path"]
    cpus, placement = _cpu_placement(pin_cpu)

    results: list[dict[str, Any]] = []
    for loop in loops:
        _, why = _loop_spec(loop)
        if why is not None:
            results.append({"loop": loop, "skipped": why})
            continue
        for flavour in flavours:
            base = {"loop": loop, "flavour": flavour}
            try:
                server = start_echo_server(flavour, loop, python=python, cpus=cpus)
            except (RuntimeError, OSError) as exc:
                results.append({**base, "error": str(exc)})
                continue
            with server:
                where = {
                    "pin_cpu": pin_cpu if cpus else None,
                    "placement": placement,
                    "server_affinity": _affinity_of(server.proc.pid),
                }
                for size in sizes:
                    for conc in concurrency:
                        results.append(
                            _one_cell(
                                server,
                                client,
                                cpus,
                                size,
                                conc,
                                n_rounds,
                                round_s,
                                warm_s,
                                per_round_warm,
                                {**base, **where},
                            )
                        )
                        if server.proc.poll() is not None:
                            break
    return results


def _one_cell(
    server: EchoServer,
    client: str,
    cpus: set[int] | None,
    size: int,
    conc: int,
    n_rounds: int,
    round_s: float,
    warm_s: float,
    per_round_warm: float,
    base: dict[str, Any],
) -> dict[str, Any]:
    cell: dict[str, Any] = {
        **base,
        "size": size,
        "concurrency": conc,
        "rounds": n_rounds,
        "round_seconds": round_s,
        "client": "bench/client/echoclient (closed loop, epoll)",
    }
    if server.proc.poll() is not None:
        cell["error"] = f"server exited with {server.proc.returncode}: {server.stderr_text()}"
        return cell
    # warm-up: one unrecorded run
    warm = run_echo_client(server.port, size, conc, warm_s, 0.0, client=client, cpus=cpus)
    if not warm.get("ok"):
        cell["error"] = f"warm-up failed: {warm.get('error') or warm.get('first_error')}"
        return cell
    runs = []
    server_cpu, client_cpu = process_cpu(server.proc.pid), children_cpu()
    for _ in range(n_rounds):
        r = run_echo_client(
            server.port, size, conc, round_s, per_round_warm, client=client, cpus=cpus
        )
        if not r.get("ok"):
            cell["error"] = f"round failed: {r.get('error') or r.get('first_error')}"
            break
        runs.append(r)
    if not runs:
        return cell
    server_after, client_after = process_cpu(server.proc.pid), children_cpu()
    # Both CPU times cover each round's own warm-up too: count its requests at the
    # round's rate. With server and client on one CPU, req/s is 1 / (server + client
    # time per request): these show where a loop's time goes, kernel included.
    requests = sum(r["req_per_s"] for r in runs) * (round_s + per_round_warm)
    if server_cpu and server_after and requests:
        cell["cpu_us_per_request"] = {
            "server_user": (server_after[0] - server_cpu[0]) / requests * 1e6,
            "server_kernel": (server_after[1] - server_cpu[1]) / requests * 1e6,
            "client": (client_after - client_cpu) / requests * 1e6,
        }
    lat = [r["latency_us"] for r in runs]
    cell.update(
        {
            "req_per_s": _median([r["req_per_s"] for r in runs]),
            "mb_per_s": _median([r["mb_per_s"] for r in runs]),
            "latency_us": {
                key: _median([entry[key] for entry in lat])
                for key in ("p50", "p90", "p99", "p99_9", "mean", "max")
            },
            "errors": sum(int(r.get("errors", 0)) for r in runs),
            # Latencies cover only requests that completed: connections the server
            # never answered in a round add none (see echoclient.c).
            "conns_without_reply": max(int(r.get("conns_without_reply", 0)) for r in runs),
            "round_req_per_s": [r["req_per_s"] for r in runs],
            "rounds_done": len(runs),
        }
    )
    return cell


if __name__ == "__main__":  # pragma: no cover - manual use: python -m ringio.bench.netpeers
    report = {
        "build": build_peers(),
        "gaio": {case: run_gaio(case) for case in ("echo64k", "conns", "idle")},
        "echo": run_echo_matrix(),
    }
    print(json.dumps(report, indent=2))
