"""Every test here runs against each file engine (uring, aio, thread)."""

from collections.abc import Callable
from pathlib import Path

import pytest
from tests.engines.conftest import engine, engine_name, event_loop_policy  # noqa: F401


@pytest.fixture
def cached_file(tmp_path: Path) -> Callable[[bytes], Path]:
    """Writes a payload to a file and reads it once, so that the page cache holds
    it; returns the file's path."""

    def make(payload: bytes) -> Path:
        p = tmp_path / "data.bin"
        p.write_bytes(payload)
        with open(p, "rb") as f:
            f.read()
        return p

    return make
