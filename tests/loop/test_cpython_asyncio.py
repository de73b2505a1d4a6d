"""CPython's ``test.test_asyncio`` on ringio's event loop, one module per test.

Each module runs in a child process (``cpython_suite.py``), with asyncio's
``SelectorEventLoop`` and default policy replaced by ringio's, so that a hang or a
leaked ring cannot take the rest of the session with it. A module passes when none
of its tests fails or errors; the counts are printed (``pytest -s``) and the full
run takes about 70 s on 2 cores. ``RINGIO_CPYTHON_SUITE=0`` skips it.

What is not run, and why (see ``cpython_suite.py``):

* test_selector_events: tests BaseSelectorEventLoop against a mock selector; no
  event loop implementation is involved.
* test_proactor_events, test_windows_events, test_windows_utils: Windows.
* ``PollEventLoopTests``/``SelectEventLoopTests``/``Kqueue*``/``Proactor*`` classes:
  repeats of the epoll classes on stock loops; the epoll classes run on ringio.
* Skipped by CPython itself here: Windows-only tests, MultiLoopChildWatcher
  (bpo-38323), refcount tests needing a debug build.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from cpython_suite import MODULES  # noqa: E402

sys.path.remove(str(HERE))

try:
    import test.test_asyncio  # noqa: F401

    HAVE_SUITE = True
except ImportError:
    HAVE_SUITE = False

pytestmark = [
    pytest.mark.skipif(not HAVE_SUITE, reason="this interpreter ships no test.test_asyncio"),
    pytest.mark.skipif(
        os.environ.get("RINGIO_CPYTHON_SUITE") == "0", reason="RINGIO_CPYTHON_SUITE=0"
    ),
]

# Modules whose tests drive real loops: the run must show ringio loops were used,
# or the patching silently failed and the module tested asyncio's own loop.
_LOOP_MODULES = {
    "test_events",
    "test_sock_lowlevel",
    "test_streams",
    "test_sendfile",
    "test_server",
    "test_sslproto",
    "test_ssl",
    "test_subprocess",
    "test_unix_events",
    "test_tasks",
}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("module", MODULES)
def test_cpython_module(module, tmp_path):
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, str(HERE / "cpython_suite.py"), "--modules", module, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=540,
        cwd=tmp_path,
    )
    assert out.exists(), proc.stderr[-4000:]
    result = json.loads(out.read_text())
    print(
        f"{module}: ran {result['ran']}, passed {result['passed']}, failed {result['failed']},"
        f" skipped {result['skipped']}, on ringio {result['tests_on_a_ringio_loop']}"
    )
    assert result["failures"] == [], proc.stderr[-6000:]
    assert result["ran"] > 0
    # No test may have run on asyncio's own loop: the patching missed a way in.
    assert result["tests_on_a_stock_loop"] == [], result["stock_loop_kinds"]
    if module in _LOOP_MODULES:
        assert result["tests_on_a_ringio_loop"] > 0
        assert result["ring_selects"] > 0
