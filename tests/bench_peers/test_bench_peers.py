"""Fast, real checks of the networking benchmark peers (all traffic on 127.0.0.1)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import socketserver
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringio.bench import netpeers


@pytest.fixture(scope="module")
def built() -> dict:
    return netpeers.build_peers()


@pytest.fixture(scope="module")
def client(built: dict) -> str:
    entry = built["echoclient"]
    if "path" not in entry:
        pytest.skip(f"C echo client unavailable: {entry}")
    return entry["path"]


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while True:
            data = self.request.recv(65536)
            if not data:
                return
            self.request.sendall(data)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture
def echo_port() -> Iterator[int]:
    """A tiny thread-per-connection Python echo server."""
    srv = _Server(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def _run(client: str, *args: str, timeout: float = 20) -> tuple[int, dict]:
    proc = subprocess.run(
        [client, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


def test_client_against_python_echo_server(client: str, echo_port: int) -> None:
    rc, out = _run(
        client,
        "--port",
        str(echo_port),
        "--size",
        "1024",
        "--concurrency",
        "4",
        "--duration",
        "0.5",
        "--warmup",
        "0.1",
    )
    assert rc == 0, out
    assert out["ok"] is True
    assert out["requests"] > 0
    assert out["errors"] == 0
    assert out["req_per_s"] > 0 and out["mb_per_s"] > 0
    lat = out["latency_us"]
    assert 0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["p99_9"] <= lat["max"]
    assert out["conns_without_reply"] == 0 and out["min_replies_per_conn"] > 0


class _EchoFirstOnly(socketserver.BaseRequestHandler):
    """Echoes on the first connection it accepts; reads and never answers on the
    others (a server that starves connections)."""

    first = threading.Lock()

    def handle(self) -> None:
        serve = self.first.acquire(blocking=False)
        while True:
            data = self.request.recv(65536)
            if not data:
                return
            if serve:
                self.request.sendall(data)


def test_client_reports_connections_a_server_never_answered(client: str) -> None:
    """Latencies come only from requests that completed: connections left waiting
    for the whole window add none, so the client counts them (a low p99 with
    most connections starved is not a fast server)."""
    srv = _Server(("127.0.0.1", 0), _EchoFirstOnly)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        port = srv.server_address[1]
        rc, out = _run(client, "--port", str(port), "--size", "512", "--concurrency", "3",
                       "--duration", "0.3", "--warmup", "0.05")  # fmt: skip
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)
    assert rc == 0, out
    assert out["requests"] > 0
    assert out["conns_without_reply"] == 2
    assert out["min_replies_per_conn"] == 0


def test_client_large_messages_partial_io(client: str, echo_port: int) -> None:
    # 1 MiB messages cannot go through in one send/recv: partial reads and writes
    rc, out = _run(
        client,
        "--port",
        str(echo_port),
        "--size",
        str(1 << 20),
        "--concurrency",
        "2",
        "--requests",
        "20",
        "--warmup",
        "0",
    )
    assert rc == 0, out
    assert out["requests"] == 20
    assert out["errors"] == 0


def test_client_threads(client: str, echo_port: int) -> None:
    rc, out = _run(
        client,
        "--port",
        str(echo_port),
        "--size",
        "100",
        "--concurrency",
        "4",
        "--threads",
        "2",
        "--duration",
        "0.3",
        "--warmup",
        "0",
    )
    assert rc == 0, out
    assert out["threads"] == 2 and out["requests"] > 0


def test_client_connection_refused(client: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nobody listens here once closed
    rc, out = _run(client, "--port", str(port), "--duration", "0.2")
    assert rc != 0
    assert out["ok"] is False
    assert "refused" in out["error"].lower()


def test_client_bad_arguments(client: str) -> None:
    proc = subprocess.run([client, "--size", "10"], capture_output=True, timeout=10, check=False)
    assert proc.returncode == 64


def test_asyncio_echo_server_flavours(client: str) -> None:
    for flavour in ("sockets", "streams", "protocol"):
        with netpeers.start_echo_server(flavour, "asyncio", max_seconds=30) as server:
            out = netpeers.run_echo_client(server.port, 512, 3, 0.2, 0.05, client=client)
            assert out["ok"] is True, (flavour, out)
            assert out["requests"] > 0
        assert server.proc.poll() is not None


def test_echo_matrix_small(built: dict) -> None:
    if "path" not in built["echoclient"]:
        pytest.skip("C echo client unavailable")
    res = netpeers.run_echo_matrix(
        loops=("asyncio", "no_such_module_xyz:new_loop"),
        flavours=("protocol",),
        rounds=2,
        duration=0.3,
        warmup=0.1,
    )
    cells = [r for r in res if r.get("loop") == "asyncio"]
    assert len(cells) == 1
    cell = cells[0]
    assert "error" not in cell, cell
    assert cell["size"] == 1024 and cell["concurrency"] == 100
    assert cell["req_per_s"] > 0
    assert cell["latency_us"]["p50"] <= cell["latency_us"]["p99"]
    assert cell["rounds_done"] == 2
    assert cell["conns_without_reply"] == 0  # asyncio's loop answers every connection
    cpu = cell["cpu_us_per_request"]
    assert cpu["server_user"] > 0 and cpu["client"] > 0  # CPU-bound on one CPU
    # On one CPU the two share its time: together at most 1 / req/s per request
    # (slack for the clock's 10 ms ticks); on two, up to twice that.
    cpus = 1 if cell.get("pin_cpu") is not None else 2
    total = cpu["server_user"] + cpu["server_kernel"] + cpu["client"]
    assert total < cpus * 1e6 / cell["req_per_s"] * 1.5
    assert "placement" in cell
    skipped = [r for r in res if r.get("loop") == "no_such_module_xyz:new_loop"]
    assert skipped and "skipped" in skipped[0]


def test_loop_workload_reports_cpu_per_request_and_unanswered_connections(
    built: dict, tmp_path: Path
) -> None:
    # `python -m ringio bench loop` (its workload, without the CLI's progress bar,
    # which needs the bench extra): besides req/s, each row says what a request
    # cost the server (and in the kernel) and the client, and how many connections
    # went unanswered.
    if "path" not in built["echoclient"]:
        pytest.skip("C echo client unavailable")
    from ringio.bench.model import Options
    from ringio.bench.workloads import loop

    notices: list[str] = []
    options = Options(smoke=True, out=tmp_path, peers=["asyncio"], notice=notices.append)
    result = loop.run(options)
    assert not notices, notices
    tables = result.to_json()["tables"]
    rows = [row for table in tables for row in table["rows"]]
    assert {row["contender"] for row in rows} == {"ringio", "asyncio"}
    assert len(rows) == 6  # three flavours, two loops
    for row in rows:
        m = row["metrics"]
        assert m["unanswered"] == 0, row
        # The kernel's part of the server's time, which is user plus system time
        # in 10 ms clock ticks: a smoke run may end before a user tick is counted
        # (seen 2026-11-26: both 6.48 µs per request), so the parts may be equal.
        assert 0 < m["server_kernel_us"] <= m["server_us"], row
        assert m["client_us"] > 0, row
        # Sharing one CPU (the harness pins both to CPU 0 where it may), server and
        # client cannot use more time than there is (slack for 10 ms clock ticks).
        cpus = 1 if 0 in os.sched_getaffinity(0) else 2
        assert m["server_us"] + m["client_us"] < cpus * 1.5e6 / m["req_per_s"], row


def test_missing_tools_are_skipped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(netpeers.shutil, "which", lambda _name: None)
    built = netpeers.build_peers(tmp_path / "build")
    assert "skipped" in built["gaio"]
    assert "skipped" in built["echoclient"]
    assert "skipped" in netpeers.run_gaio("echo64k", build_dir=tmp_path / "build")
    res = netpeers.run_echo_matrix(loops=("asyncio",), build_dir=tmp_path / "build")
    assert res and "skipped" in res[0]


def test_gaio_quick(built: dict) -> None:
    if shutil.which("go") is None:
        pytest.skip("go not installed")
    assert "path" in built["gaio"], built["gaio"]
    echo = netpeers.run_gaio("echo64k", quick=True, extra_args=["-messages", "500"])
    assert "error" not in echo, echo
    assert echo["mb_per_s"] > 0
    assert echo["bytes"] == 500 * 65536
    conns = netpeers.run_gaio("conns", quick=True, extra_args=["-conns", "256"])
    assert "error" not in conns, conns
    assert conns["conns"] == 256 and conns["seconds"] > 0
    idle = netpeers.run_gaio("idle", quick=True, extra_args=["-idle-conns", "200"])
    assert "error" not in idle, idle
    assert idle["conns"] == 200 and "rss_per_conn_bytes" in idle
