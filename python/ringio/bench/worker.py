"""Running measurements in child processes, so each contender's threads, memory and
CPU time are its own and the parent's progress display cannot steal the GIL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from collections.abc import Callable, Mapping
from typing import Any


class WorkerSkipped(Exception):
    """The contender cannot run here (peer missing, backend unavailable)."""


def run_worker(
    module: str,
    spec: dict[str, Any],
    timeout: float = 600,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Runs ``python -m module SPEC_JSON``, with `env` added to the environment;
    returns its JSON answer.

    The answer holds either the figures, ``{"skipped": reason}`` or ``{"error": reason}``;
    a crash or a timeout becomes an error, never an exception in the parent.
    """
    env = {**os.environ, **(env or {})}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", module, json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        err = proc.stderr.strip().splitlines()
        return {"error": err[-1] if err else f"exit status {proc.returncode}"}
    return json.loads(lines[-1])


def worker_main(handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]]) -> None:
    """Entry point of a worker module: dispatches on ``spec["kind"]``, prints one JSON line."""
    spec = json.loads(sys.argv[1])
    try:
        answer = handlers[spec["kind"]](spec)
    except (ImportError, WorkerSkipped) as exc:
        # A peer that is missing (or whose C library is) is skipped, not fatal.
        answer = {"skipped": str(exc) or type(exc).__name__}
    except Exception as exc:
        traceback.print_exc()
        answer = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(answer), flush=True)


def import_peer(module: str) -> Any:
    """Imports a peer's module; any failure (missing package or C library) skips it."""
    import importlib

    try:
        return importlib.import_module(module)
    except Exception as exc:  # OSError from ctypes when libaio.so.1 is missing, etc.
        raise WorkerSkipped(f"cannot import {module}: {exc}") from exc
