"""A/B of event loops on the echo benchmark, contenders interleaved in one run.

    .venv/bin/python tools/loop_ab.py [--rounds N] [--size B] [--conc N]
        [--flavours sockets,streams,protocol] [contender ...]

Contenders: ``ringio`` (phase 2 transports), ``ringio-sel`` (ringio with
``RINGIO_LOOP_TRANSPORT=selector``: asyncio's transports on the ring selector, i.e.
phase 1), ``uvloop``, ``asyncio``, and ``ringio@TREE``: ringio as built in another
work tree (its ``.venv`` and its ``bench/servers/echo_server.py``), e.g.
``ringio@/work/main`` to compare a branch with main in the same run, and
``ringio+VAR=VALUE``: ringio with that environment variable set. Server and C
client (``bench/build/echoclient``) are pinned to CPU 0. Besides req/s it prints
the server's CPU time per request (from /proc/<pid>/stat): on a shared machine req/s
swings with other load on that CPU, the server's own cost per request much less.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

TCK = os.sysconf("SC_CLK_TCK")
# The interpreter by its path relative to the repo when it lives there (.venv/bin/
# python): on this machine, the phase-1 selector path ran 2.5x slower when the same
# interpreter was started by its absolute path /work/<tree>/.venv/bin/python (seen
# with the old select code too; uvloop, asyncio and the ring transport were not
# affected). Not understood; the relative form matches how the Makefile runs it.
_REL = os.path.relpath(sys.executable)
PY = sys.executable if _REL.startswith("..") else _REL


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TCK


def run_one(cmd: list[str], env: dict[str, str], size: int, conc: int, dur: float):
    server = subprocess.Popen(
        ["taskset", "-c", "0", *cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        port = int(server.stdout.readline())  # type: ignore[union-attr]
        c0 = _cpu(server.pid)
        out = subprocess.run(
            ["taskset", "-c", "0", "bench/build/echoclient", "--port", str(port),
             "--size", str(size), "--concurrency", str(conc), "--duration", str(dur),
             "--warmup", "0.5"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        c1 = _cpu(server.pid)
    finally:
        server.kill()
        server.wait()
    d = json.loads(out)
    rps = d["req_per_s"]
    # The CPU time covers warm-up and run; assume the warm-up ran at the same rate.
    us = (c1 - c0) / (rps * (dur + 0.5)) * 1e6 if rps else float("nan")
    lat = d.get("latency_us", {})
    return int(rps), us, lat.get("p50"), lat.get("p99"), d.get("first_error")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--conc", type=int, default=100)
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--flavours", default="sockets,streams,protocol")
    ap.add_argument("contenders", nargs="*", default=["ringio", "ringio-sel", "uvloop", "asyncio"])
    a = ap.parse_args()
    base = [PY, "bench/servers/echo_server.py"]
    ringio = ["--loop-factory", "ringio:new_event_loop"]
    for r in range(a.rounds):
        for fl in a.flavours.split(","):
            for name in a.contenders:
                env = dict(os.environ)
                args = {"uvloop": ["--loop", "uvloop"], "asyncio": []}.get(name, ringio)
                if name == "ringio-sel":
                    env["RINGIO_LOOP_TRANSPORT"] = "selector"
                if name.startswith("ringio+"):
                    var, _, value = name.split("+", 1)[1].partition("=")
                    env[var] = value
                cmd = base
                if name.startswith("ringio@"):
                    tree = name.split("@", 1)[1]
                    cmd = [f"{tree}/.venv/bin/python", f"{tree}/bench/servers/echo_server.py"]
                    env.pop("VIRTUAL_ENV", None)
                rps, us, p50, p99, err = run_one(
                    [*cmd, "--flavour", fl, *args], env, a.size, a.conc, a.duration
                )
                print(
                    f"round={r} {fl:9s} {name:11s} req/s={rps:7d} server_us/req={us:6.2f}"
                    f" p50_us={p50:8.0f} p99_us={p99:8.0f}"
                    + (f" error={err}" if err else ""),
                    flush=True,
                )


if __name__ == "__main__":
    main()
