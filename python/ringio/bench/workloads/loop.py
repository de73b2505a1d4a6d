"""``loop``: ringio's event loop against asyncio's and uvloop on the vmbench echo matrix.

The servers are ``bench/servers/echo_server.py`` (flavours ``sockets``: sock_recv /
sock_sendall, ``streams``: StreamReader/Writer, ``protocol``: a bare Protocol);
the client is the compiled closed-loop ``bench/client/echoclient``; both come from
``ringio.bench.netpeers.run_echo_matrix``. ringio runs as a loop factory
(``ringio:new_event_loop``). ``--quick``: 1 KiB x 100 connections, 3 rounds of 1 s.
"""

from __future__ import annotations

from typing import Any

from ..model import Options, Table, WorkloadResult
from ..netpeers import run_echo_matrix

NAME = "loop"
RINGIO = "ringio:new_event_loop"
PEERS = ("asyncio", "uvloop")
FLAVOURS = ("sockets", "streams", "protocol")


def _contender(loop: str) -> str:
    return "ringio" if loop == RINGIO else loop


def run(options: Options) -> WorkloadResult:
    loops = [RINGIO]
    for peer in PEERS:
        if options.wants(peer):
            loops.append(peer)
    if options.peers:
        for peer in options.peers:
            if peer not in PEERS:
                options.notice(f"peer {peer}: unknown for this workload, skipped")
    if options.smoke:
        kw: dict[str, Any] = {"sizes": (1024,), "concurrency": (4,), "quick": False}
        kw.update(rounds=1, duration=0.2, warmup=0.1)
    elif options.quick:
        kw = {"sizes": (1024,), "concurrency": (100,), "quick": True}
    else:
        kw = {"sizes": (1024, 10240, 102400), "concurrency": (1, 10, 100, 1000), "quick": False}
    result = WorkloadResult(NAME, parameters={"loops": loops, "flavours": FLAVOURS, **kw})
    options.progress(len(loops) * len(FLAVOURS), 0)
    baseline = "uvloop" if "uvloop" in loops else "asyncio"
    tables = {
        flavour: Table(
            f"echo, {flavour} flavour",
            metric="req_per_s",
            baseline=baseline,
            higher_is_better=True,
            note="closed-loop C client, server and client pinned to one CPU; medians of the "
            "rounds; latency in microseconds; server_us: the server's CPU time per request "
            "(server_kernel_us of it in the kernel), client_us the client's; unanswered: "
            "connections without a single reply in the worst round (their requests add "
            "no latency)",
        )
        for flavour in FLAVOURS
    }
    for loop in loops:
        cells = run_echo_matrix(loops=(loop,), flavours=FLAVOURS, pin_cpu=0, **kw)
        options.progress(0, len(FLAVOURS))
        for cell in cells:
            if "skipped" in cell or "error" in cell:
                why = cell.get("skipped") or cell.get("error")
                options.notice(f"{_contender(loop)} {cell.get('flavour', '')}: {why}")
                continue
            lat = cell.get("latency_us", {})
            cpu = cell.get("cpu_us_per_request", {})
            tables[cell["flavour"]].add(
                _contender(loop),
                {"size": cell["size"], "concurrency": cell["concurrency"]},
                req_per_s=cell.get("req_per_s"),
                mb_per_s=cell.get("mb_per_s"),
                p50_us=lat.get("p50"),
                p99_us=lat.get("p99"),
                server_us=cpu["server_user"] + cpu["server_kernel"] if cpu else None,
                server_kernel_us=cpu.get("server_kernel"),
                client_us=cpu.get("client"),
                unanswered=cell.get("conns_without_reply"),
            )
    result.tables.extend(tables.values())
    return result
