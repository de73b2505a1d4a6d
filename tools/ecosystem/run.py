"""Runs anyio's, uvicorn's and (part of) aiohttp's own test suites on ringio's loop.

    .venv/bin/python tools/ecosystem/run.py [--suites anyio,uvicorn,aiohttp]
        [--loop ringio|asyncio] [-- PYTEST_ARGS]

``make test-ecosystem`` installs the pinned packages (``requirements.txt``) and
runs this. The tests come from each project's sdist on PyPI (all three ship
their ``tests/``), downloaded with ``pip download --no-binary :all:`` into
``build/ecosystem/`` and unpacked there once. Each suite runs in its own pytest
process, from its unpacked tree, with its own configuration, plus the
``ringio_ecosystem`` plugin (``ringio_ecosystem.py``: ringio becomes the default
loop). Results: a summary line per suite and ``build/ecosystem/<suite>.xml``
(JUnit XML). The exit status is 1 if a suite had failures or errors.
``--loop asyncio`` runs the same on asyncio's own loop, as the reference that
tells the environment's failures (no IPv6 name for localhost, say) from ringio's.
docs/ecosystem.md gives the results and explains each failure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BUILD = ROOT / "build" / "ecosystem"

# name -> (version on PyPI, pytest arguments). The versions must match
# requirements.txt (the installed package is the one under test).
SUITES: dict[str, tuple[str, list[str]]] = {
    # anyio's config loads its plugins (-p anyio ...) and sets a 20 s timeout.
    # Only the asyncio backend without uvloop runs on ringio: the trio and
    # uvloop parameters are deselected.
    "anyio": ("4.16.0", ["-k", "not trio and not uvloop"]),
    # uvicorn's addopts ask for pytest-xdist (-n 8): replaced by its report
    # options alone, one process (2 shared cores here).
    "uvicorn": ("0.54.0", ["-o", "addopts=-rfExXs --strict-config", "--timeout", "60"]),
    # aiohttp's whole suite is long (and its addopts ask for xdist and coverage):
    # its functional client/server and websocket modules, on the pure-asyncio
    # loop parameter ("pyloop", which asyncio.new_event_loop() makes: ringio).
    "aiohttp": (
        "3.14.5",
        [
            *("-o", "addopts=-rfE --strict-markers", "--timeout", "60"),
            *("--aiohttp-loop", "pyloop"),
            "tests/test_web_functional.py",
            "tests/test_client_functional.py",
            "tests/test_web_websocket_functional.py",
            "tests/test_client_ws_functional.py",
        ],
    ),
}


def unpack(name: str, version: str) -> Path:
    tree = BUILD / f"{name}-{version}"
    if (tree / "tests").is_dir():
        return tree
    BUILD.mkdir(parents=True, exist_ok=True)
    sdist = BUILD / f"{name}-{version}.tar.gz"
    if not sdist.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary",
             ":all:", "-d", str(BUILD), f"{name}=={version}"],
            check=True,
        )  # fmt: skip
    with tarfile.open(sdist) as tar:
        tar.extractall(BUILD, filter="data")
    if not (tree / "tests").is_dir():
        raise SystemExit(f"{sdist.name} has no tests/ directory")
    return tree


def totals(xml: Path) -> dict[str, int]:
    root = ET.parse(xml).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    out = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for s in suites:
        for k in out:
            out[k] += int(s.get(k, 0))
    out["passed"] = out["tests"] - out["failures"] - out["errors"] - out["skipped"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--suites", default=",".join(SUITES))
    ap.add_argument("--loop", choices=("ringio", "asyncio"), default="ringio")
    ap.add_argument("pytest_args", nargs="*", help="after --: passed to every pytest run")
    a = ap.parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    env["RINGIO_ECOSYSTEM_LOOP"] = a.loop
    bad = 0
    summary = []
    for name in a.suites.split(","):
        version, args = SUITES[name]
        tree = unpack(name, version)
        tag = name if a.loop == "ringio" else f"{name}-{a.loop}"
        xml = BUILD / f"{tag}.xml"
        loops = BUILD / f"{tag}-loops.json"
        env["RINGIO_ECOSYSTEM_JSON"] = str(loops)
        cmd = [
            # -P: the current directory (the unpacked sdist, with the package's
            # source) is not put first on sys.path: the installed release is tested.
            *(sys.executable, "-P", "-m", "pytest", "-p", "ringio_ecosystem"),
            *("-p", "no:asyncio", "-p", "no:cacheprovider", f"--junitxml={xml}"),
            *args,
            *a.pytest_args,
        ]
        if not any(not arg.startswith("-") for arg in [*a.pytest_args, *args[-1:]]):
            cmd.append("tests")  # the whole suite unless paths were given
        print(f"== {name} {version} on {a.loop}: {' '.join(cmd[1:])}", flush=True)
        rc = subprocess.run(cmd, cwd=tree, env=env).returncode
        if not xml.exists():
            print(f"{name}: pytest exited with {rc} and no report", flush=True)
            bad += 1
            continue
        t = totals(xml)
        ran_on = json.loads(loops.read_text()) if loops.exists() else {}
        bad += bool(t["failures"] or t["errors"] or rc not in (0, 1))
        summary.append(
            f"{name} {version} on {a.loop}: {t['passed']} passed, {t['failures']} failed, "
            f"{t['errors']} errors, {t['skipped']} skipped; tests that made a loop: "
            f"ringio {ran_on.get('ringio', '?')}, stock asyncio {ran_on.get('stock', '?')}, "
            f"both {ran_on.get('both', '?')}, none {ran_on.get('none', '?')}"
        )
    print("\n".join(summary))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
