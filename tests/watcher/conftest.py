from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

import ringio


@pytest.fixture
def watcher() -> Iterator[ringio.Watcher]:
    w = ringio.Watcher()
    try:
        yield w
    finally:
        w.close()


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(4096)
    try:
        yield ls
    finally:
        ls.close()
