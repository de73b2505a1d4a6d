"""``python -m ringio bench [files|vectored|echo|loop|all] ...``: the benchmark CLI."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from . import report
from .engines import ENGINES
from .model import Options, WorkloadResult

# Workload name -> module.
WORKLOADS: dict[str, str] = {
    "files": "ringio.bench.workloads.files",
    "vectored": "ringio.bench.workloads.vectored",
    "echo": "ringio.bench.workloads.echo",
    "loop": "ringio.bench.workloads.loop",
    "http": "ringio.bench.workloads.http",
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


class _PlainDisplay:
    """Progress as plain lines on stderr, for an install without the bench extra
    (rich): one line per notice, one line per workload as it ends."""

    def __init__(self) -> None:
        self.steps: dict[str, list[int]] = {}

    def __enter__(self) -> _PlainDisplay:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def print(self, line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    def start(self, name: str) -> Callable[[int, int], None]:
        steps = self.steps.setdefault(name, [0, 0])

        def advance(total: int, step: int) -> None:
            steps[0] += total
            steps[1] += step

        return advance

    def end(self, name: str) -> None:
        done, total = self.steps[name][1], self.steps[name][0]
        self.print(f"{name}: done ({done}/{total} steps)")


class _RichDisplay(_PlainDisplay):
    """A rich progress bar per workload."""

    def __init__(self) -> None:
        super().__init__()
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        err = Console(stderr=True, highlight=False, soft_wrap=True)  # notices stay one line
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            console=err,
            transient=False,
        )

    def __enter__(self) -> _RichDisplay:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def print(self, line: str) -> None:
        self.progress.console.print(line, markup=False)

    def start(self, name: str) -> Callable[[int, int], None]:
        progress = self.progress
        task = progress.add_task(name, total=0)

        def advance(total: int, step: int) -> None:
            if total:
                cur = progress.tasks[[t.id for t in progress.tasks].index(task)].total
                progress.update(task, total=(cur or 0) + total)
            if step:
                progress.advance(task, step)

        return advance

    def end(self, name: str) -> None:
        pass


def _display() -> _PlainDisplay:
    if importlib.util.find_spec("rich") is None:
        return _PlainDisplay()
    return _RichDisplay()


def missing_extra() -> str | None:
    """The one line to print when a module the suite needs is missing, else None."""
    missing = [m for m in ("matplotlib",) if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    return (
        f"ringio bench needs {', '.join(missing)} (charts): "
        "pip install 'ringio[bench]' (it also installs the peers compared with)"
    )


def run_bench(args: argparse.Namespace) -> list[WorkloadResult]:
    """Runs the chosen workloads; prints tables on stdout, notices and progress on stderr."""
    names = list(WORKLOADS) if args.workload == "all" else [args.workload]
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    workdir = args.workdir or out / ".data"
    results: list[WorkloadResult] = []
    started = time.monotonic()

    with _display() as display:
        for name in names:
            module = load_workload(name)
            if module is None:
                display.print(f"notice: workload {name}: not yet available")
                continue
            notices: list[str] = []

            def notice(msg: str, _name: str = name, _notices: list[str] = notices) -> None:
                _notices.append(msg)
                display.print(f"notice: {_name}: {msg}")

            options = Options(
                quick=args.quick,
                smoke=args.smoke,
                out=out,
                engines=list(args.engines),
                peers=args.peers,
                workdir=workdir,
                notice=notice,
                progress=display.start(name),
            )
            result: WorkloadResult = module.run(options)
            result.notices[:0] = notices
            results.append(result)
            display.end(name)
            chart = report.write_chart(result, out / f"{name}.png")
            if chart:
                result.parameters["chart"] = str(chart)

    # Workloads remove their data files; drop the folders they leave empty.
    for sub in sorted(workdir.glob("**/"), reverse=True) if workdir.exists() else []:
        if not any(sub.iterdir()):
            sub.rmdir()

    header = report.run_header()
    text = report.header_markdown(header) + "\n".join(report.markdown(r) for r in results) + "\n"
    sys.stdout.write(text)
    sys.stdout.flush()
    (out / "results.md").write_text(text)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    report.write_json(
        results,
        out / "results.json",
        {**header, "mode": mode, "argv": sys.argv[1:],
         "elapsed_s": round(time.monotonic() - started, 2)},
    )  # fmt: skip
    print(f"results: {out / 'results.json'}", file=sys.stderr)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "bench":
        if (line := missing_extra()) is not None:
            print(line, file=sys.stderr)
            return 2
        run_bench(args)
    return 0
