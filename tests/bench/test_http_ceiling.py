"""tools/http_ceiling.py's bare server: the reference its HTTP figures stand on.

It must answer every request wrk sends on a keep-alive connection, pipelined ones
included, with a whole reply whose body has the size it was given; a reply that
came short or late would make the reference look faster or slower than it is.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "http_ceiling.py"
REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.fixture
def bare_server(request: pytest.FixtureRequest) -> Iterator[int]:
    size = request.param
    proc = subprocess.Popen(
        [sys.executable, str(TOOL), "--serve-bare", str(size)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait(timeout=10)


def read_reply(sock: socket.socket, pending: bytearray) -> bytes:
    """One HTTP reply from `sock` (whose bytes already read start `pending`)."""
    while b"\r\n\r\n" not in pending:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection in the middle of a reply"
        pending += chunk
    head, _, _ = bytes(pending).partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"HTTP/1.1 200 OK"
    fields = dict(line.split(b": ", 1) for line in lines[1:])
    length = int(fields[b"content-length"])
    end = len(head) + 4 + length
    while len(pending) < end:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection in the middle of a body"
        pending += chunk
    body = bytes(pending[len(head) + 4 : end])
    del pending[:end]
    return body


@pytest.mark.parametrize("bare_server", [13], indirect=True)
def test_bare_server_answers_each_request_on_a_kept_connection(bare_server: int) -> None:
    with socket.create_connection(("127.0.0.1", bare_server), timeout=10) as sock:
        pending = bytearray()
        for _ in range(3):
            sock.sendall(REQUEST)
            assert len(read_reply(sock, pending)) == 13
        sock.sendall(REQUEST * 4)  # pipelined, as wrk's may arrive together
        assert [len(read_reply(sock, pending)) for _ in range(4)] == [13] * 4
        assert not pending


@pytest.mark.parametrize("bare_server", [1 << 20], indirect=True)
def test_bare_server_sends_a_large_body_whole(bare_server: int) -> None:
    with socket.create_connection(("127.0.0.1", bare_server), timeout=10) as sock:
        pending = bytearray()
        for _ in range(2):
            sock.sendall(REQUEST)
            assert len(read_reply(sock, pending)) == 1 << 20


@pytest.mark.parametrize("bare_server", [10_240], indirect=True)
def test_body_size_reads_what_a_server_answers(bare_server: int) -> None:
    spec = importlib.util.spec_from_file_location("http_ceiling", TOOL)
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.body_size(bare_server, "/json") == 10_240
