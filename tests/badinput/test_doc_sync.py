"""docs/bad-input.md is generated from the table the suite runs: it must be current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_doc_is_generated_from_the_table():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "badinput_table.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_public_api_has_rows():
    from tests.badinput.table import CASES

    apis = {
        c.api.rsplit(".", 1)[0] if c.api[-1].islower() and "." in c.api else c.api for c in CASES
    }
    covered = " ".join(c.api for c in CASES)
    for name in (
        "ringio.aio.",
        "ringio.aio.AsyncContext",
        "ringio.uring.",
        "ringio.aligned",
        "ringio.dio_alignment",
        "ringio.open",
        "ringio.AsyncFileIO",
        "ringio.AsyncBufferedFile",
        "ringio.AsyncTextFile",
        "ringio.os.",
        "ringio.os.path.",
        "ringio.compat.linux_aio",
        "ringio.compat.caio",
        "ringio.Watcher",
        "ringio.EventLoop",
    ):
        assert name in covered, f"no bad-input rows for {name}"
    assert apis
