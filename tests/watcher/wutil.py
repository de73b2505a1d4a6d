"""Helpers shared by the Watcher tests (127.0.0.1 only, every loop bounded)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import pytest

import ringio


def tcp_pair(listener: socket.socket) -> tuple[socket.socket, socket.socket]:
    """A connected (client, server) TCP pair on 127.0.0.1, set up synchronously."""
    c = socket.create_connection(listener.getsockname(), timeout=5)
    c.settimeout(None)
    s, _ = listener.accept()
    return c, s


def collect(
    w: ringio.Watcher,
    n: int,
    timeout: float = 10.0,
    on_result: Callable[[ringio.OpResult], None] | None = None,
) -> list[ringio.OpResult]:
    """Waits for `n` results (bounded by `timeout`); fails the test otherwise."""
    out: list[ringio.OpResult] = []
    end = time.monotonic() + timeout
    while len(out) < n:
        left = end - time.monotonic()
        if left <= 0:
            pytest.fail(f"only {len(out)} of {n} results after {timeout} s: {out[-3:]}")
        for r in w.wait_io(min(left, 1.0)):
            out.append(r)
            if on_result is not None:
                on_result(r)
    return out
