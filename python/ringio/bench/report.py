"""Turning results into Markdown tables, results.json and PNG charts."""

from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from .model import Table, WorkloadResult

# Distribution names whose versions go into results.json (installed or not).
PEER_DISTRIBUTIONS = (
    "ringio",
    "aiofiles",
    "aiofile",
    "caio",
    "libaio",
    "linux-aio",
    "linux-aio-bind",
    "uvloop",
    # bench http: the frameworks and the other loops
    "uvicorn",
    "httptools",
    "aiohttp",
    "starlette",
    "anyio",
    "rloop",
    "zuvloop",
    "rsloop",
)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def markdown_table(table: Table) -> str:
    """One Markdown table: contender, parameter columns, metric columns, ratio column."""
    param_keys: list[str] = []
    metric_keys: list[str] = []
    for row in table.rows:
        param_keys += [k for k in row.params if k not in param_keys]
        metric_keys += [k for k in row.metrics if k not in metric_keys]
    ratio_header = f"{table.metric} vs {table.baseline}"
    header = ["contender", *param_keys, *metric_keys, ratio_header]
    lines = [
        f"### {table.title}",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join([":--"] * (1 + len(param_keys)) + ["--:"] * (len(metric_keys) + 1)) + "|",
    ]
    for row in table.rows:
        ratio = table.ratio(row)
        cells = [
            row.contender,
            *(_fmt(row.params.get(k)) for k in param_keys),
            *(_fmt(row.metrics.get(k)) for k in metric_keys),
            "-" if ratio is None else f"{ratio:.2f}x",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if table.note:
        lines += ["", table.note]
    return "\n".join(lines) + "\n"


def markdown(result: WorkloadResult) -> str:
    """Every table of a workload, under a heading."""
    parts = [f"## {result.name}\n"]
    parts += [markdown_table(t) for t in result.tables if t.rows]
    if not any(t.rows for t in result.tables):
        parts.append("_no contender ran_\n")
    return "\n".join(parts)


def write_chart(result: WorkloadResult, path: Path) -> Path | None:
    """One PNG per workload: a panel per table, bars per contender grouped by parameters."""
    tables = [t for t in result.tables if t.rows]
    if not tables:
        return None
    import matplotlib

    matplotlib.use("Agg")  # no display on CI or servers
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(tables), 1, figsize=(11, 3.6 * len(tables)), squeeze=False)
    for ax, table in zip(axes[:, 0], tables, strict=True):
        contenders = list(dict.fromkeys(r.contender for r in table.rows))
        groups = list(dict.fromkeys(_param_label(r.params) for r in table.rows))
        width = 0.8 / max(len(contenders), 1)
        for i, contender in enumerate(contenders):
            values = {
                _param_label(r.params): r.metrics.get(table.metric)
                for r in table.rows
                if r.contender == contender
            }
            xs = [g + i * width for g in range(len(groups))]
            ys = [values.get(g) or 0 for g in groups]
            ax.bar(xs, ys, width, label=contender)
        ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
        ax.set_xticklabels(groups, fontsize=7)
        shown = [v for r in table.rows if (v := r.metrics.get(table.metric))]
        if shown and max(shown) / min(shown) > 50:  # e.g. open() vs thread hops per line
            ax.set_yscale("log")
        better = "higher" if table.higher_is_better else "lower"
        ax.set_title(f"{table.title} ({table.metric}, {better} is better)", fontsize=9)
        ax.legend(fontsize=6, ncol=3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _param_label(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "-"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def peer_versions() -> dict[str, str | None]:
    """Versions of ringio and every peer (None: not installed), plus fio's."""
    versions: dict[str, str | None] = {}
    for dist in PEER_DISTRIBUTIONS:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    fio = shutil.which("fio")
    versions["fio"] = None
    if fio:
        try:
            out = subprocess.run([fio, "--version"], capture_output=True, text=True, timeout=10)
            versions["fio"] = out.stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            pass
    return versions


def machine_info() -> dict[str, Any]:
    """What a reader needs to weigh the figures: CPU, cores, kernel, Python."""
    return {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
    }


def _ringio_commit() -> str | None:
    """The commit of the ringio checkout this runs from (an editable install), with
    "+changes" when its tree differs from it; for an installed wheel,
    RINGIO_BENCH_COMMIT (`tools/test-py.sh --bench` sets it to the checkout's that
    built the wheel), else None."""
    if commit := os.environ.get("RINGIO_BENCH_COMMIT"):
        return commit
    src = Path(__file__).resolve().parents[3]
    if not (src / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(src), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=10)  # fmt: skip
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "-uno"],
                               capture_output=True, text=True, timeout=10)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    commit = head.stdout.strip()
    if not commit:
        return None
    return commit + ("+changes" if dirty.stdout.strip() else "")


def run_header() -> dict[str, Any]:
    """When, on what and with what the figures were measured."""
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "ringio_commit": _ringio_commit(),
        "machine": machine_info(),
        "versions": peer_versions(),
    }


def header_markdown(header: dict[str, Any]) -> str:
    """The lines above the tables: date, commit, machine, versions."""
    m = header["machine"]
    peers = ", ".join(f"{k} {v}" for k, v in header["versions"].items() if v and k != "ringio")
    return (
        f"Measured {header['date']}, ringio {header['versions'].get('ringio')} "
        f"(commit {header['ringio_commit'] or 'unknown'}), {m['cpu_model']} x "
        f"{m['cpu_count']}, Linux {m['kernel']}, {m['python_implementation']} "
        f"{m['python']}. Peers: {peers or 'none installed'}.\n\n"
    )


def write_json(
    results: list[WorkloadResult], path: Path, extra: dict[str, Any] | None = None
) -> Path:
    """results.json: raw figures of every workload, machine info and peer versions."""
    extra = extra or {}
    doc = {
        "machine": extra.get("machine") or machine_info(),
        "versions": extra.get("versions") or peer_versions(),
        **extra,
        "workloads": {r.name: r.to_json() for r in results},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    return path
