"""``python -m ringio bench [files|vectored|echo|loop|all] ...``: the benchmark CLI."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from . import report
from .engines import ENGINES
from .model import Options, WorkloadResult

# Workload name -> module. A workload whose module is not there yet (echo, loop) is
# announced as "not yet available" and skipped: drop the module in to enable it.
WORKLOADS: dict[str, str] = {
    "files": "ringio.bench.workloads.files",
    "vectored": "ringio.bench.workloads.vectored",
    "echo": "ringio.bench.workloads.echo",
    "loop": "ringio.bench.workloads.loop",
}


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ringio", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    bench = sub.add_parser("bench", help="benchmark ringio against its peers")
    bench.add_argument("workload", nargs="?", default="all", choices=[*WORKLOADS, "all"])
    bench.add_argument("--quick", action="store_true", help="smaller counts (a few minutes)")
    bench.add_argument(
        "--smoke",
        action="store_true",
        help="tiny counts that only exercise the harness (figures are meaningless)",
    )
    bench.add_argument("--out", type=Path, default=Path("bench/results"), help="output folder")
    bench.add_argument(
        "--engines",
        type=_csv,
        default=list(ENGINES),
        help="ringio engines, comma-separated (default: every engine; missing ones are skipped)",
    )
    bench.add_argument(
        "--peers",
        type=_csv,
        default=None,
        help="peers to compare with, comma-separated (default: all the workload knows)",
    )
    bench.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="folder for data files (default: OUT/.data; must be a real disk for O_DIRECT)",
    )
    return parser


def load_workload(name: str):  # -> module | None
    """The workload's module, or None when it is not there yet."""
    module = WORKLOADS[name]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return None
        raise


def run_bench(args: argparse.Namespace) -> list[WorkloadResult]:
    """Runs the chosen workloads; prints tables on stdout, notices and progress on stderr."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(stderr=True, highlight=False, soft_wrap=True)  # notices stay one line
    names = list(WORKLOADS) if args.workload == "all" else [args.workload]
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    workdir = args.workdir or out / ".data"
    results: list[WorkloadResult] = []
    started = time.monotonic()

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    ) as progress:
        for name in names:
            module = load_workload(name)
            if module is None:
                progress.console.print(f"notice: workload {name}: not yet available", markup=False)
                continue
            task = progress.add_task(name, total=0)
            notices: list[str] = []

            def notice(msg: str, _name: str = name, _notices: list[str] = notices) -> None:
                _notices.append(msg)
                progress.console.print(f"notice: {_name}: {msg}", markup=False)

            def advance(total: int, step: int, _task=task) -> None:
                if total:
                    cur = progress.tasks[[t.id for t in progress.tasks].index(_task)].total
                    progress.update(_task, total=(cur or 0) + total)
                if step:
                    progress.advance(_task, step)

            options = Options(
                quick=args.quick,
                smoke=args.smoke,
                out=out,
                engines=list(args.engines),
                peers=args.peers,
                workdir=workdir,
                notice=notice,
                progress=advance,
            )
            result: WorkloadResult = module.run(options)
            result.notices[:0] = notices
            results.append(result)
            chart = report.write_chart(result, out / f"{name}.png")
            if chart:
                result.parameters["chart"] = str(chart)

    # Workloads remove their data files; drop the folders they leave empty.
    for sub in sorted(workdir.glob("**/"), reverse=True) if workdir.exists() else []:
        if not any(sub.iterdir()):
            sub.rmdir()

    text = "\n".join(report.markdown(r) for r in results) + "\n"
    sys.stdout.write(text)
    sys.stdout.flush()
    (out / "results.md").write_text(text)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    report.write_json(
        results,
        out / "results.json",
        {"mode": mode, "argv": sys.argv[1:], "elapsed_s": round(time.monotonic() - started, 2)},
    )
    err.print(f"results: {out / 'results.json'}")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "bench":
        run_bench(args)
    return 0
