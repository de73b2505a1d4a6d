"""The examples run and do what they say."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
