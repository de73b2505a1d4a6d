"""The HTTP benchmark's cells with each loop's ceiling: how fast the same server
would run if its event loop's own native code cost nothing.

    .venv/bin/python tools/http_ceiling.py [--rounds N] [--seconds S]
        [--cells uvicorn:/:1,aiohttp:/json:100,...] [--loops ringio,uvloop]
        [--placement "one CPU"|"two CPUs"] [--no-bare]

Rounds are interleaved; the server's CPU per request comes from /proc/<pid>/stat
and ``wrk``'s from the children's rusage. With server and ``wrk`` on one CPU (the
benchmark's "one CPU" placement) the CPU is never idle and a request costs the
server's CPU time plus ``wrk``'s: req/s is 1 / (server + client time per request),
which the table shows beside the measured rate. A second pass runs ``perf record``
on each server (``cpu-clock``) and counts the samples in the loop's own shared
object (``_core`` for ringio; uvloop's ``loop`` extension, which holds libuv). That
share of the server's time taken away gives the loop's *ceiling*: the req/s of a
loop whose native code is free, the framework's Python, the interpreter, the
kernel's TCP work and ``wrk`` remaining. It bounds what any change to that native
code can give; the Python-level parts of a loop (asyncio's methods it inherits) are
not in it.

The *bare* server runs beside the loops: a Python epoll loop that answers every
request with uvicorn's "hello" headers and a body as long as the framework's for
that route, without parsing, framework or event loop; its request is the kernel's,
the wake-ups' and ``wrk``'s share. On one CPU the *bound* adds to it the least user
time any loop's server spent outside its loop's shared object: about the most a
loop that cost nothing at all could reach with the framework's own time as it is.
That user time also holds what the interpreter and libc do for the loop (asyncio's
Python methods a loop inherits, the C API calls of uvloop's Cython code), so the
bound is an estimate, somewhat low. With ``wrk`` on the other CPU ("two CPUs") the
two sides overlap and wait for each other, so neither a ceiling nor a bound follows
from the times; the bare server's rate is the reference there.
Needs ``wrk`` and ``perf``.
"""

from __future__ import annotations

import argparse
import http.client as http_client
import os
import select
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from email.utils import formatdate
from pathlib import Path

from ringio.bench.netpeers import children_cpu, process_cpu
from ringio.bench.workloads import http

# The shared object that holds each loop's native code (perf's dso names); a loop
# not named here (asyncio's own) has none, and its share is 0.
LOOP_DSO = {"ringio": "_core.cpython", "uvloop": "loop.cpython", "rloop": "_rloop"}
CELLS = (
    "uvicorn:/:1,uvicorn:/json:1,aiohttp:/:1,aiohttp:/:100,aiohttp:/json:1,aiohttp:/json:100,"
    "aiohttp:/file:1"
)
BARE = "bare"


def serve_bare(body_size: int) -> None:
    """The bare server: epoll, recv, and per request a reply of uvicorn's "hello"
    headers with a body of `body_size` bytes (each reply sent whole before the next
    event)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    listener.setblocking(False)
    print(listener.getsockname()[1], flush=True)
    reply = (
        b"HTTP/1.1 200 OK\r\ndate: " + formatdate(usegmt=True).encode() + b"\r\n"
        b"server: uvicorn\r\ncontent-type: text/plain\r\n"
        b"content-length: " + str(body_size).encode() + b"\r\n\r\n" + b"x" * body_size
    )
    poller = select.epoll()
    poller.register(listener.fileno(), select.EPOLLIN)
    conns: dict[int, socket.socket] = {}
    while True:
        for fd, _ in poller.poll():
            if fd == listener.fileno():
                try:
                    conn, _ = listener.accept()
                except BlockingIOError:
                    continue
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.setblocking(False)
                conns[conn.fileno()] = conn
                poller.register(conn.fileno(), select.EPOLLIN)
                continue
            conn = conns[fd]
            try:
                data = conn.recv(65536)
                if data:  # wrk's requests are small: whole ones in each read
                    out = reply * data.count(b"\r\n\r\n")
                    sent = conn.send(out)
                    if sent < len(out):  # a large reply: the rest blocking
                        conn.setblocking(True)
                        conn.sendall(out[sent:])
                        conn.setblocking(False)
                    continue
            except BlockingIOError:
                continue
            except OSError:
                pass
            poller.unregister(fd)
            del conns[fd]
            conn.close()


def body_size(port: int, route: str) -> int:
    """The length of the body a server answers `route` with."""
    conn = http_client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", route)
        return len(conn.getresponse().read())
    finally:
        conn.close()


def start(name: str, framework: str, cpus: set[int], file: Path | None, size: int = 0):
    if name == BARE:
        return http.spawn_server([sys.executable, __file__, "--serve-bare", str(size)], cpus)
    return http.start_server(framework, http.LOOPS[name], cpus, file)


def measure(
    port: int, route: str, conns: int, seconds: int, pid: int, cpus: set[int]
) -> dict[str, float]:
    before, client_before = process_cpu(pid), children_cpu()
    result = http.run_wrk(port, route, conns, seconds, cpus)
    after, client_after = process_cpu(pid), children_cpu()
    if before is None or after is None:
        raise RuntimeError(f"no CPU times for the server (pid {pid}) in /proc")
    n = result["requests"]
    return {
        "req_per_s": result["req_per_s"],
        "server_us": (sum(after) - sum(before)) * 1e6 / n,
        "client_us": (client_after - client_before) * 1e6 / n,
    }


def server_split(
    port: int, route: str, conns: int, pid: int, dso: str | None, out: Path, cpus: set[int]
) -> dict[str, float]:
    """The fractions of the server's CPU samples in `dso` ("loop"), in the kernel
    ("kernel") and elsewhere in user space ("rest": the framework, the
    interpreter, libc), under a wrk run."""
    runner = threading.Thread(target=http.run_wrk, args=(port, route, conns, 4, cpus))
    runner.start()
    time.sleep(0.5)
    subprocess.run(
        ["perf", "record", "-q", "-F", "5000", "-e", "cpu-clock", "-p", str(pid),
         "-o", str(out), "--", "sleep", "3"],
        capture_output=True, check=True,
    )  # fmt: skip
    runner.join()
    report = subprocess.run(
        ["perf", "report", "-i", str(out), "--sort", "dso", "--stdio", "-q", "-F", "sample,dso"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    samples = {"loop": 0, "kernel": 0, "rest": 0}
    for line in report.splitlines():
        parts = line.split(None, 1)
        if len(parts) != 2 or not parts[0].isdigit():
            continue
        if dso is not None and dso in parts[1]:
            where = "loop"
        else:
            where = "kernel" if "[kernel" in parts[1] else "rest"
        samples[where] += int(parts[0])
    total = sum(samples.values())
    if total == 0:
        raise RuntimeError("perf recorded no samples of the server")
    return {k: v / total for k, v in samples.items()}


def run_cell(args: argparse.Namespace, cell: str, tmp: Path) -> None:
    framework, route, conns_text = cell.split(":")
    conns = int(conns_text)
    server_cpus, client_cpus = http.PLACEMENTS[args.placement]
    one_cpu = server_cpus == client_cpus
    loops = args.loops.split(",")
    base = loops[-1]
    names = loops + ([] if args.no_bare else [BARE])
    file = None
    if route == "/file":  # the benchmark's 1 MiB file
        file = tmp / "http_ceiling-file.bin"
        if not file.exists() or file.stat().st_size != 1 << 20:
            file.write_bytes(os.urandom(1 << 20))
    servers = {name: start(name, framework, server_cpus, file) for name in loops}
    if not args.no_bare:  # with the body size the framework's reply has
        size = body_size(servers[base][1], route)
        servers[BARE] = start(BARE, framework, server_cpus, None, size)
    try:
        for _, port in servers.values():
            http.run_wrk(port, "/", conns, 1, client_cpus)  # warm-up
        rows: dict[str, list[dict[str, float]]] = {name: [] for name in names}
        for r in range(args.rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                proc, port = servers[name]
                rows[name].append(measure(port, route, conns, args.seconds, proc.pid, client_cpus))
        shares = {}
        if one_cpu:
            for name in loops:
                proc, port = servers[name]
                out = tmp / f"http_ceiling-{name}.data"
                dso = LOOP_DSO.get(name)
                shares[name] = server_split(port, route, conns, proc.pid, dso, out, client_cpus)
    finally:
        for proc, _ in servers.values():
            http.stop_server(proc)
    base_rate = statistics.median(m["req_per_s"] for m in rows[base])
    print(f"{framework} {route} x {conns} connections, {args.rounds} rounds ({args.placement}):")
    rest_min = None
    for name in names:
        rate = statistics.median(m["req_per_s"] for m in rows[name])
        paired = [
            m["req_per_s"] / b["req_per_s"] for m, b in zip(rows[name], rows[base], strict=True)
        ]
        server = statistics.median(m["server_us"] for m in rows[name])
        client = statistics.median(m["client_us"] for m in rows[name])
        print(
            f"  {name:8s} {rate:9.0f} req/s ({statistics.median(paired):.2f}x {base}, "
            f"{min(paired):.2f}-{max(paired):.2f}), {1e6 / rate:6.1f} us a request: "
            f"server {server:5.1f} us + client {client:5.1f} us"
            + (f" (1 / the sum: {1e6 / (server + client):6.0f} req/s)" if one_cpu else ""),
            flush=True,
        )
        if name in shares:
            split = {k: v * server for k, v in shares[name].items()}
            ceiling = 1e6 / (server - split["loop"] + client)
            rest_min = split["rest"] if rest_min is None else min(rest_min, split["rest"])
            print(
                f"           server: loop's native code {split['loop']:4.1f} us, kernel "
                f"{split['kernel']:5.1f} us, the rest of user space {split['rest']:5.1f} us; "
                f"ceiling {ceiling:6.0f} req/s ({ceiling / base_rate:.2f}x {base})"
            )
    if one_cpu and BARE in rows and rest_min is not None:
        bare = 1e6 / statistics.median(m["req_per_s"] for m in rows[BARE])
        bound = 1e6 / (bare + rest_min)
        print(
            f"  bound: the bare server's request ({bare:.1f} us) plus the least user time "
            f"outside the loops' code ({rest_min:.1f} us): {bound:.0f} req/s "
            f"({bound / base_rate:.2f}x {base})"
        )


def main() -> None:
    if sys.argv[1:2] == ["--serve-bare"]:
        serve_bare(int(sys.argv[2]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--cells", default=CELLS, help="framework:route:connections,...")
    ap.add_argument("--loops", default="ringio,uvloop", help="the last one is the baseline")
    ap.add_argument("--placement", default="one CPU", choices=sorted(http.PLACEMENTS))
    ap.add_argument("--no-bare", action="store_true", help="leave the bare server out")
    args = ap.parse_args()
    for tool in ("wrk", "perf"):
        if shutil.which(tool) is None:
            sys.exit(f"http_ceiling: needs {tool}, which is not on PATH")
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    for cell in args.cells.split(","):
        run_cell(args, cell, tmp)


if __name__ == "__main__":
    main()
