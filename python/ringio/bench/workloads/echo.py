"""Echo workload: ringio.Watcher against gaio (Go) on gaio's own echo benchmarks.

Three tables, each contender in its own process, run alternately (ringio, gaio,
ringio, gaio, ...) so that load from other processes hits both alike; the median of
the repeats is reported:

* ``echo64k``: one connection echoing 64 KiB messages (the client keeps one write and
  one read submitted), MB/s;
* ``conns``: 8,192 clients each echo 1 KiB, seconds to completion. gaio gets a swap
  buffer of conns x 1 KiB (its default 64 KiB one makes this hang on 2 cores: nil-buffer
  reads fall back to 16 bytes and are never re-submitted);
* ``idle``: RSS per idle connection at 10,000 connections (one pending read each, server
  ends measured, client ends in another process).

ringio's server is a Watcher in a separate process (gaio's runs on its own goroutines),
with a buffer per connection as the gaio peer's server has; for ``echo64k`` a second
ringio row uses the Watcher's zero-copy echo instead (buffer-ring reads, each ring buffer
written straight back), and a third the own-buffer echo with both Watchers on a
``ringio.EventLoop``'s ring (awaited; no ring or eventfd of their own). Every TCP socket
has TCP_NODELAY, as Go sets on the gaio peer's.
Placement: nothing is pinned (the gaio program and both ringio processes run wherever
the scheduler puts them on the machine's CPUs).
"""

from __future__ import annotations

import statistics
from typing import Any

from ringio.bench.model import Options, Table, WorkloadResult
from ringio.bench.netpeers import run_gaio
from ringio.bench.worker import run_worker

NAME = "echo"
WORKER = "ringio.bench.workloads._echo_worker"


def _counts(options: Options) -> dict[str, int]:
    if options.smoke:
        return {"messages": 50, "conns": 64, "idle": 100, "repeats": 1}
    if options.quick:
        return {"messages": 5000, "conns": 8192, "idle": 10000, "repeats": 3}
    return {"messages": 100000, "conns": 8192, "idle": 10000, "repeats": 5}


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if isinstance(r.get(key), int | float)]
    return statistics.median(values) if values else None


def _gaio_args(counts: dict[str, int]) -> list[str]:
    return [
        "-messages",
        str(counts["messages"]),
        "-conns",
        str(counts["conns"]),
        "-idle-conns",
        str(counts["idle"]),
    ]


def run(options: Options) -> WorkloadResult:
    counts = _counts(options)
    result = WorkloadResult(NAME, parameters=dict(counts))
    tables = {
        "echo64k": Table(
            "echo: one connection, 64 KiB messages",
            metric="mb_per_s",
            baseline="gaio",
            higher_is_better=True,
            note="client keeps one write and one read submitted; unpinned; median of repeats",
        ),
        "conns": Table(
            "echo: 8,192 clients x 1 KiB, time to completion",
            metric="seconds",
            baseline="gaio",
            higher_is_better=False,
            note="gaio with a conns x 1 KiB swap buffer (its default one hangs here)",
        ),
        "idle": Table(
            "echo: RSS per idle connection (10,000 connections, one pending read each)",
            metric="rss_per_conn_bytes",
            baseline="gaio",
            higher_is_better=False,
            note=(
                "server ends measured (VmRSS delta from after listening to after the "
                "last accept); client ends in another process. heap_per_conn_bytes "
                "(ringio): malloc's bytes in use over the same span (mallinfo2), which "
                "a heap's free space before the span does not hide as it hides RSS"
            ),
        ),
    }
    cases = [("echo64k", "echo64k"), ("conns", "conns"), ("idle", "idle")]
    steps = sum(counts["repeats"] if c != "idle" else 1 for c, _ in cases)
    options.progress(steps * 2 + 2 * counts["repeats"] + 1, 0)
    want_gaio = options.wants("gaio")
    for case, kind in cases:
        repeats = 1 if case == "idle" else counts["repeats"]
        mine: list[dict[str, Any]] = []
        ring: list[dict[str, Any]] = []
        onloop: list[dict[str, Any]] = []
        theirs: list[dict[str, Any]] = []
        for _ in range(repeats):
            spec = {
                "kind": kind,
                "messages": counts["messages"],
                "conns": counts["conns"],
                "idle_conns": counts["idle"],
            }
            answer = run_worker(WORKER, spec, timeout=120)
            if "error" in answer or "skipped" in answer:
                options.notice(f"echo {case}: ringio: {answer.get('error') or answer}")
            else:
                mine.append(answer)
            options.progress(0, 1)
            if case == "echo64k":
                # The Watcher's own zero-copy echo: buffer-ring reads written back
                # as they are (the gaio peer's server reads into a buffer of its own,
                # as the row above does).
                answer = run_worker(WORKER, {**spec, "server_bufsize": 0}, timeout=120)
                if "error" in answer or "skipped" in answer:
                    options.notice(f"echo {case}: ringio ring buffers: {answer.get('error')}")
                else:
                    ring.append(answer)
                options.progress(0, 1)
                # The same own-buffer echo, both Watchers on a ringio.EventLoop.
                answer = run_worker(WORKER, {**spec, "on_loop": "shared"}, timeout=120)
                if "error" in answer or "skipped" in answer:
                    options.notice(f"echo {case}: ringio on the loop: {answer.get('error')}")
                else:
                    onloop.append(answer)
                options.progress(0, 1)
            if want_gaio:
                g = run_gaio(case, quick=True, extra_args=_gaio_args(counts))
                if "error" in g or "skipped" in g:
                    options.notice(f"echo {case}: gaio: {g.get('error') or g.get('skipped')}")
                else:
                    theirs.append(g)
            options.progress(0, 1)
        table = tables[case]
        params = {"echo64k": {"msg_size": 65536}, "conns": {"conns": counts["conns"]}}.get(
            case, {"conns": counts["idle"]}
        )
        contenders = [("ringio.Watcher", mine), ("gaio", theirs)]
        if ring:
            contenders.insert(1, ("ringio.Watcher, ring-buffer echo", ring))
        if onloop:
            contenders.insert(1, ("ringio.Watcher on ringio.EventLoop", onloop))
        for name, runs in contenders:
            if not runs:
                continue
            metrics: dict[str, float | int | None] = {
                table.metric: _median(runs, table.metric),
                "runs": len(runs),
            }
            if case == "echo64k":
                metrics["best_mb_per_s"] = max(r["mb_per_s"] for r in runs)
            if case == "conns":
                metrics["conns_per_s"] = _median(runs, "conns_per_s")
            if case == "idle" and all(r.get("heap_per_conn_bytes") is not None for r in runs):
                metrics["heap_per_conn_bytes"] = _median(runs, "heap_per_conn_bytes")
            table.add(name, params, **metrics)
    if want_gaio:
        # gaio's own Test8k behaviour (64 KiB swap buffer, short reads not re-read):
        # expected to hit the hard timeout; recorded so the report says so.
        if not options.smoke:
            stock = run_gaio("conns", quick=True, timeout=10, extra_args=["-stock"])
            hung = "error" in stock
            result.notices.append(
                "gaio conns with its default 64 KiB swap buffer (gaio's Test8k client): "
                + ("did not finish within 10 s (hangs)" if hung else "finished")
            )
            options.notice(result.notices[-1])
    options.progress(0, 1)
    result.tables = list(tables.values())
    return result
