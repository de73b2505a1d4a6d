"""When the kernel refuses io_uring (or AIO too), ringio falls back and still works:
the engine suites run under a seccomp filter like Docker's default profile."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DENY = [sys.executable, str(ROOT / "tools" / "seccomp_deny.py")]


def run_denied(groups: list[str], *cmd: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RINGIO_ENGINE"}
    return subprocess.run(
        [*DENY, *groups, "--", *cmd], capture_output=True, text=True, timeout=300, cwd=ROOT,
        env=env,
    )


def engine_report(groups: list[str]) -> str:
    out = run_denied(
        groups, sys.executable, "-c",
        "import ringio; i = ringio.engine(); print(i.name); print(i.refused)",
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the filter knows x86_64 numbers")
def test_io_uring_refused_falls_back_to_kernel_aio_and_says_why():
    report = engine_report(["io_uring"])
    name, refused = report.splitlines()
    assert name == "aio"
    assert "uring" in refused and "Operation not permitted" in refused


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the filter knows x86_64 numbers")
def test_both_refused_falls_back_to_threads():
    name, refused = engine_report(["io_uring", "aio"]).splitlines()
    assert name == "thread" and "uring" in refused and "aio" in refused


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the filter knows x86_64 numbers")
@pytest.mark.parametrize("groups", [["io_uring"], ["io_uring", "aio"]], ids=["no-uring", "none"])
def test_the_file_engine_suite_passes_on_the_fallback(groups):
    out = run_denied(
        groups, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        "tests/engines", "tests/aio" if groups == ["io_uring"] else "tests/engines",
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout
