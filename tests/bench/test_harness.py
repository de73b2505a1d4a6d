"""The benchmark harness itself: structure of its output, never its timings.

Runs use ``--smoke`` (tiny counts) so the whole file takes a few seconds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("rich", reason="the bench extra is not installed")
pytest.importorskip("matplotlib", reason="the bench extra is not installed")

from ringio.bench import Options, Table, WorkloadResult, report
from ringio.bench.cli import main
from ringio.bench.worker import run_worker
from ringio.bench.workloads import files

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_table_ratio_and_markdown(tmp_path: Path) -> None:
    t = Table("demo", metric="ops", baseline="peer", higher_is_better=True, note="a note")
    t.add("ringio[aio]", {"qd": 1}, ops=300.0)
    t.add("peer", {"qd": 1}, ops=100.0)
    t.add("ringio[aio]", {"qd": 8}, ops=50.0)  # no baseline at qd 8
    assert t.ratio(t.rows[0]) == pytest.approx(3.0)
    assert t.ratio(t.rows[2]) is None

    md = report.markdown_table(t).splitlines()
    assert md[0] == "### demo"
    assert md[2] == "| contender | qd | ops | ops vs peer |"
    assert md[4].startswith("| ringio[aio] | 1 | 300 |") and md[4].endswith("| 3.00x |")
    assert md[6].endswith("| - |")
    assert md[-1] == "a note"

    result = WorkloadResult("demo", tables=[t])
    chart = report.write_chart(result, tmp_path / "demo.png")
    assert chart is not None and chart.read_bytes()[:8] == PNG_MAGIC
    raw = result.to_json()
    assert raw["tables"][0]["rows"][0]["ratio_vs_baseline"] == pytest.approx(3.0)


def test_baseline_params_compare_every_row_with_one_baseline_cell() -> None:
    # A blocking loop has only qd 1: every queue depth is compared with it.
    t = Table("t", metric="ops", baseline="os.pread", higher_is_better=True,
              baseline_params={"qd": 1})  # fmt: skip
    t.add("os.pread", {"qd": 1}, ops=100.0)
    t.add("ringio.open[aio]", {"qd": 1}, ops=60.0)
    t.add("ringio.open[aio]", {"qd": 64}, ops=120.0)
    assert [t.ratio(r) for r in t.rows] == [pytest.approx(1.0), pytest.approx(0.6),
                                            pytest.approx(1.2)]  # fmt: skip


def test_paired_ratios_take_each_rounds_ratio() -> None:
    # The host sped up between rounds: each round's ratio is 0.6 or 0.5, while the
    # ratio of the medians would be 100 / 200.
    got = files.paired_ratios([60.0, 100.0, 150.0], [100.0, 200.0, 250.0])
    assert got == {"paired_ratio": pytest.approx(0.6), "paired_ratio_min": pytest.approx(0.5),
                   "paired_ratio_max": pytest.approx(0.6)}  # fmt: skip
    # A contender with rounds the baseline lacks (or none) has no paired figure.
    assert files.paired_ratios([1.0, 2.0], [1.0]) == {}
    assert files.paired_ratios([1.0], []) == {}


def test_ratio_in_process_compares_the_two_loops_pass_by_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A clock that only the passes move: the plain loop's take 1.0, the
    # contender's 2.0 in every pair but one slower outlier, which the median leaves
    # out. The pairs alternate which runs first; each ratio is plain / contender.
    from ringio.bench.workloads import _files_random

    now = [0.0]
    order: list[str] = []

    class Plain:
        def open(self, paths: list[str]) -> None:
            assert paths == ["the file"]

        def read_stream(self, i: int, size: int, offsets: list[int], depth: int) -> int:
            assert (i, size, offsets, depth) == (0, 4096, [0, 4096], 1)
            now[0] += 1.0
            order.append("plain")
            return size * len(offsets)

        def close(self) -> None:
            order.append("closed")

        def stop(self) -> None:
            pass

    async def mine() -> None:
        now[0] += 50.0 if order.count("mine") == 5 else 2.0
        order.append("mine")

    monkeypatch.setattr(_files_random, "PreadFiles", Plain)
    monkeypatch.setattr(_files_random.time, "perf_counter", lambda: now[0])
    ratio = asyncio.run(_files_random._ratio_in_process(mine, "the file", 4096, [0, 4096], 0.0))
    assert ratio == pytest.approx(0.5)
    pairs = order[2:-1]  # after the warm-up passes, before the close
    assert order[:2] == ["plain", "mine"] and order[-1] == "closed"
    assert len(pairs) == 2 * _files_random.MIN_PAIRS
    assert pairs[:4] == ["mine", "plain", "plain", "mine"]


def test_files_smoke_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two rounds: each contender's cell is the median of its runs.
    monkeypatch.setattr(files, "SMOKE", dataclasses.replace(files.SMOKE, direct_rounds=2, rounds=2))
    # Every small-files worker keeps its heap (the same for every contender); no
    # other worker's environment is changed.
    envs: list[tuple[str, object]] = []
    real_run_worker = files.run_worker

    def recording_run_worker(module, spec, timeout=600, env=None):
        envs.append((spec["kind"], env))
        return real_run_worker(module, spec, timeout, env)

    monkeypatch.setattr(files, "run_worker", recording_run_worker)
    out = tmp_path / "results"
    argv = ["bench", "files", "--smoke", "--out", str(out), "--engines", "aio,uring,bogus",
            "--peers", "open,nonexistent"]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert {kind for kind, _ in envs} > {"small_files"}
    for kind, env in envs:
        assert env == (files.KEEP_HEAP if kind == "small_files" else None)
    assert files.KEEP_HEAP["MALLOC_TRIM_THRESHOLD_"] == str(256 << 20)

    # Tables on stdout, one row per contender and parameter set.
    assert "## files" in captured.out
    for files_n in (1, 2):
        assert f"| ringio[aio] | {files_n} |" in captured.out
        assert f"| open() | {files_n} |" in captured.out
    assert "| open() | write |" in captured.out and "| ringio[aio] | read |" in captured.out

    # One-line notices for what could not run; never a crash.
    from ringio import _engines

    if _engines._usable("uring") is None:
        assert f"| ringio[uring] | {files_n} |" in captured.out
        # The experiment as a ringio user writes it: ringio.open files on ringio.run.
        assert f"| ringio.open[uring] on ringio's loop | {files_n} |" in captured.out
    else:
        assert "engine uring: skipped" in captured.err
    assert "engine bogus: skipped (unknown engine" in captured.err
    assert "peer nonexistent: unknown for this workload, skipped" in captured.err
    assert "| ringio.open[aio] |" in captured.out  # line iteration through ringio.open

    doc = json.loads((out / "results.json").read_text())
    assert {"cpu_model", "cpu_count", "kernel", "python"} <= doc["machine"].keys()
    assert {"ringio", "aiofiles", "aiofile", "caio", "libaio", "linux-aio", "fio"} <= set(
        doc["versions"]
    )
    assert doc["mode"] == "smoke"
    tables = doc["workloads"]["files"]["tables"]
    assert [len(t["rows"]) > 0 for t in tables][:2] == [True, True]
    row = tables[0]["rows"][0]
    assert {"contender", "params", "metrics", "ratio_vs_baseline"} <= row.keys()
    assert {"runtime_s", "threads", "io_workers", "rss_mb", "vsz_mb", "cpu_pct"} <= row[
        "metrics"
    ].keys()
    small = [r for r in tables[0]["rows"] if r["contender"] in ("open()", "ringio[aio]")]
    assert small and all(r["metrics"]["threads"] == 1 for r in small), small
    cached = next(t for t in tables if "cached" in t["title"])
    assert cached["baseline"] == "os.pread" and cached["baseline_params"] == {"qd": 1}
    pread_cells = [r for r in cached["rows"] if r["contender"] == "os.pread"]
    assert [r["params"] for r in pread_cells] == [{"qd": 1}]
    for r in cached["rows"]:
        m = r["metrics"]
        assert 0 < m["ops_per_s_min"] <= m["ops_per_s"] <= m["ops_per_s_max"], r
        assert m["cpu_us"] > 0, r
        assert r["ratio_vs_baseline"] is not None, r  # every depth against qd 1
        if r["contender"] != "os.pread":  # and against os.pread's run in each round
            assert m["paired_ratio_min"] <= m["paired_ratio"] <= m["paired_ratio_max"], r
        if r["contender"].startswith("ringio.open[uring]"):  # one thread: paired in-process
            lo, mid, hi = (m[f"in_process_ratio{s}"] for s in ("_min", "", "_max"))
            assert 0 < lo <= mid <= hi, r
        if r["contender"] == "os.pread":
            assert "in_process_ratio" not in m, r
    for t in tables:  # every table's cells: medians of the rounds, with their spread
        for r in t["rows"]:
            m, metric = r["metrics"], t["metric"]
            assert m[f"{metric}_min"] <= m[metric] <= m[f"{metric}_max"], (t["title"], r)
    direct = next(t for t in tables if "O_DIRECT" in t["title"])
    cells = [(r["contender"], r["params"]["qd"]) for r in direct["rows"]]
    assert ("ringio[aio]", 1) in cells and len(cells) == len(set(cells))
    if _engines._usable("uring") is None:
        by_task = "ringio.open[uring].preadinto"
        assert (by_task, 1) in cells and (by_task + " on ringio's loop", 1) in cells
    fio_ran = any(r["contender"] == "fio io_uring" for r in direct["rows"])
    for r in direct["rows"]:
        m = r["metrics"]
        assert 0 < m["ops_per_s_min"] <= m["ops_per_s"] <= m["ops_per_s_max"], r
        if fio_ran and r["contender"] != "fio io_uring":  # each round's own fio run
            assert m["paired_ratio_min"] <= m["paired_ratio"] <= m["paired_ratio_max"], r
    assert (out / "files.png").read_bytes()[:8] == PNG_MAGIC
    md = (out / "results.md").read_text()
    assert md.startswith("Measured ") and "\n## files" in md
    assert {"date", "ringio_commit"} <= doc.keys() and doc["date"][:4].isdigit()
    assert not (out / ".data" / "files").exists()  # data files cleaned up


def test_vectored_smoke_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    assert main(["bench", "vectored", "--smoke", "--out", str(out), "--engines", "aio",
                 "--peers", "os"]) == 0  # fmt: skip
    captured = capsys.readouterr()
    doc = json.loads((out / "results.json").read_text())
    sync, asyncio_table = doc["workloads"]["vectored"]["tables"]
    # 2 shapes x (write, read) x (inside, outside) per contender.
    assert {r["contender"] for r in sync["rows"]} == {"os", "ringio[aio].Context"}
    assert len(sync["rows"]) == 16
    assert {r["contender"] for r in asyncio_table["rows"]} == {"os", "ringio[aio]"}
    assert asyncio_table["baseline"] == "os"
    metrics = sync["rows"][0]["metrics"]
    assert metrics.keys() == {"separate_mb_s", "vectored_mb_s", "vectored_over_separate"}
    assert "vectored_over_separate" in captured.out
    assert (out / "vectored.png").read_bytes()[:8] == PNG_MAGIC


def test_missing_peer_is_skipped_with_notice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(files.PEER_MODULES, "aiofiles", "aiofiles_is_not_installed_here")
    notices: list[str] = []
    # Only the two peers asked for: the others may be missing from a test install.
    names = files.contenders(
        Options(engines=["aio"], peers=["aiofiles", "open"], notice=notices.append)
    )
    assert "aiofiles" not in names
    assert "ringio[aio]" in names and "open()" in names
    assert notices == ["peer aiofiles: not installed, skipped"]


def test_worker_skip_is_reported_not_raised() -> None:
    answer = run_worker(
        files.WORKER,
        {
            "kind": "small_files",
            "contender": "no-such-peer",
            "paths": [],
            "sizes": [],
            "reads": 1,
            "interval": 0,
        },
    )
    assert answer == {"skipped": "unknown contender no-such-peer"}


def _without(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Makes `modules` look uninstalled to the CLI's checks."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in modules else real(name, *a)
    )


def test_bench_without_rich_shows_plain_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _without(monkeypatch, "rich")
    out = tmp_path / "results"
    argv = ["bench", "vectored", "--smoke", "--out", str(out), "--engines", "aio",
            "--peers", "os"]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "vectored: done (" in captured.err
    assert "## vectored" in captured.out and (out / "results.json").exists()


def test_bench_without_matplotlib_says_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _without(monkeypatch, "matplotlib")
    assert main(["bench", "files", "--smoke", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'ringio[bench]'" in err[0]


WRK_OUTPUT = """Running 1s test @ http://127.0.0.1:8000/
  1 threads and 100 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.21ms  310.00us   9.12ms   91.00%
    Req/Sec    80.12k     2.10k   83.00k    70.00%
  Latency Distribution
     50%    1.18ms
     75%    1.30ms
     90%    1.41ms
     99%    2.50ms
  80123 requests in 1.00s, 11.23MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:  80100.55
Transfer/sec:     11.22MB
"""


def test_wrk_output_is_parsed() -> None:
    from ringio.bench.workloads import http

    assert http.parse_wrk(WRK_OUTPUT) == {
        "req_per_s": 80100.55, "requests": 80123, "p50_us": 1180.0, "p99_us": 2500.0,
        "errors": 7,
    }  # fmt: skip
    with pytest.raises(ValueError, match="no rate"):
        http.parse_wrk("unable to connect to 127.0.0.1:1 Connection refused")


def test_http_smoke_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    if shutil.which("wrk") is None:
        pytest.skip("wrk (Debian package) is installed by make bench-deps")
    for module in ("uvicorn", "httptools", "aiohttp"):
        pytest.importorskip(module)
    out = tmp_path / "results"
    assert main(["bench", "http", "--smoke", "--out", str(out), "--peers", "asyncio"]) == 0
    doc = json.loads((out / "results.json").read_text())
    tables = doc["workloads"]["http"]["tables"]
    import importlib.util

    uvicorn_file = ["uvicorn, file (GET /file)"] if importlib.util.find_spec("starlette") else []
    assert [t["title"] for t in tables] == [
        "uvicorn, hello (GET /)", "uvicorn, json (GET /json)", *uvicorn_file,
        "aiohttp, hello (GET /)", "aiohttp, json (GET /json)", "aiohttp, file (GET /file)",
    ]  # fmt: skip
    for t in tables:
        assert {r["contender"] for r in t["rows"]} == {"ringio", "asyncio"}, t
        for r in t["rows"]:
            m = r["metrics"]
            assert m["req_per_s"] > 0 and m["server_us"] > 0 and m["errors"] == 0, r
            assert 0 < m["p50_us"] <= m["p99_us"], r


def test_a_server_that_logs_much_is_not_blocked_by_its_stderr() -> None:
    # aiohttp on rloop or rsloop (CPython 3.14) logs a traceback per request task
    # whose connection wrk closed: with stderr an unread pipe the server stopped
    # once the pipe was full.
    from ringio.bench.workloads import http

    child = (
        "import sys; print(4321, flush=True); sys.stderr.write('x' * 1_000_000);"
        "sys.stderr.flush(); print('served', flush=True)"
    )
    proc, port = http.spawn_server([sys.executable, "-c", child], {0})
    try:
        assert port == 4321
        assert proc.wait(timeout=20) == 0
    finally:
        http.stop_server(proc)


def test_a_server_that_does_not_start_says_why() -> None:
    from ringio.bench.workloads import http

    child = "import sys; sys.stderr.write('first\\nno framework here\\n'); sys.exit(3)"
    with pytest.raises(RuntimeError, match="no framework here"):
        http.spawn_server([sys.executable, "-c", child], {0})


@pytest.mark.parametrize("framework", ["aiohttp", "uvicorn"])
@pytest.mark.parametrize("loop", ["ringio", "asyncio"])
def test_the_file_route_serves_the_file_whole(tmp_path: Path, framework: str, loop: str) -> None:
    # aiohttp's FileResponse goes through loop.sendfile on ringio's loop, Starlette's
    # through threads and transport.write: the bytes must be the file's, each time.
    import os
    import urllib.request

    from ringio.bench.workloads import http

    pytest.importorskip(framework)
    if framework == "uvicorn":
        pytest.importorskip("httptools")
        pytest.importorskip("starlette")
    served = tmp_path / "served.bin"
    served.write_bytes(os.urandom(http.FILE_SIZE + 123))
    proc, port = http.start_server(framework, http.LOOPS[loop], {0}, served)
    try:
        for _ in range(3):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/file", timeout=10) as r:
                assert r.status == 200
                assert r.read() == served.read_bytes()
    finally:
        http.stop_server(proc)


def test_without_a_file_the_file_route_is_not_found() -> None:
    import urllib.error
    import urllib.request

    from ringio.bench.workloads import http

    for module in ("uvicorn", "httptools"):
        pytest.importorskip(module)
    proc, port = http.start_server("uvicorn", http.LOOPS["ringio"], {0})
    try:
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/file", timeout=10)
        assert err.value.code == 404
    finally:
        http.stop_server(proc)
