"""The examples run and do what they say."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_aio_copy_example_copies_a_file(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_bytes(os.urandom(3 * (1 << 20) + 12345))
    out = subprocess.run(
        [sys.executable, ROOT / "examples" / "aio_copy.py", src, dst],
        capture_output=True, text=True, timeout=60, check=True,
    )
    assert dst.read_bytes() == src.read_bytes()
    assert out.stdout.strip() == f"{src.stat().st_size} bytes copied"


def _start(*args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _connect(port: int, proc: subprocess.Popen[str], seconds: float = 20) -> socket.socket:
    deadline = time.monotonic() + seconds
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                _, err = proc.communicate(timeout=5)
                raise AssertionError(f"server did not start: {err[-2000:]}") from None
            time.sleep(0.05)


def _http_get(port: int, path: str, proc: subprocess.Popen[str]) -> tuple[int, bytes]:
    with _connect(port, proc) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    if b"transfer-encoding: chunked" in head.lower():
        out, rest = b"", body
        while True:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line, 16)
            if size == 0:
                break
            out, rest = out + rest[:size], rest[size + 2 :]
        body = out
    return status, body


def _stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_watcher_echo_example_echoes_and_stops_on_ctrl_c() -> None:
    port = _free_port()
    proc = _start(ROOT / "examples" / "watcher_echo.py", port)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("listening on 127.0.0.1:")
        conns = [_connect(port, proc) for _ in range(3)]
        for k, c in enumerate(conns):
            msg = f"hello {k}".encode() * 100
            c.sendall(msg)
            got = b""
            while len(got) < len(msg):
                got += c.recv(65536)
            assert got == msg
            c.close()
        time.sleep(0.5)  # the server is idle in wait_io(): Ctrl-C must still stop it
        out, _ = _stop(proc)
        assert proc.returncode == 0 and "stopped" in out
    finally:
        if proc.poll() is None:
            proc.kill()


def test_watcher_echo_example_stops_on_ctrl_c_before_any_connection() -> None:
    proc = _start(ROOT / "examples" / "watcher_echo.py", _free_port())
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("listening on 127.0.0.1:")
        time.sleep(0.3)  # inside wait_io(), nothing in flight but the accept
        out, _ = _stop(proc)
        assert proc.returncode == 0 and "stopped" in out
    finally:
        if proc.poll() is None:
            proc.kill()


def test_uvicorn_example_serves_on_ringio_loop() -> None:
    pytest.importorskip("uvicorn")
    port = _free_port()
    proc = _start(ROOT / "examples" / "uvicorn_app.py", port)
    try:
        assert _http_get(port, "/", proc) == (200, b"hello, world")
        status, body = _http_get(port, "/file", proc)
        assert status == 200
        assert body == (ROOT / "examples" / "uvicorn_app.py").read_bytes()
    finally:
        _stop(proc)


def test_aiohttp_example_serves_files(tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")
    payload = os.urandom(300_000)
    (tmp_path / "blob.bin").write_bytes(payload)
    port = _free_port()
    proc = _start(ROOT / "examples" / "aiohttp_file_server.py", tmp_path, port)
    try:
        assert _http_get(port, "/blob.bin", proc) == (200, payload)
        assert _http_get(port, "/head/blob.bin?n=100", proc) == (200, payload[:100])
        assert _http_get(port, "/missing", proc)[0] == 404
        assert _http_get(port, "/..%2Fetc%2Fpasswd", proc)[0] == 404
    finally:
        _stop(proc)


def test_vectored_log_example_writes_every_record(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    out = subprocess.run(
        [sys.executable, ROOT / "examples" / "vectored_log.py", log, "5000"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    lines = log.read_text().splitlines()
    assert sorted(lines) == [f"record {i:08d}" for i in range(5000)]
    assert out.stdout.strip() == f"{log.stat().st_size} bytes written"


def test_parallel_hash_example_matches_hashlib(tmp_path: Path) -> None:
    files = []
    for k, size in enumerate([0, 1, 256 * 1024, 5 * 1024 * 1024 + 7]):
        p = tmp_path / f"f{k}"
        p.write_bytes(os.urandom(size))
        files.append(p)
    out = subprocess.run(
        [sys.executable, ROOT / "examples" / "parallel_hash.py", *files],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    want = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p}" for p in files]
    assert out.stdout.splitlines() == want
