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
