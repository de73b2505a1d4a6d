"""The workload interface: what a workload module receives and returns.

A workload is a module in ``ringio.bench.workloads`` exposing::

    NAME: str                     # the CLI name, e.g. "files"
    def run(options: Options) -> WorkloadResult

A result holds one or more tables; each table names a baseline contender and a
metric, and the report adds a "x baseline" column computed from them, so a
workload only has to produce raw figures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Options:
    """What the CLI hands every workload."""

    quick: bool = False
    smoke: bool = False  # tiny counts, for the harness's own tests: the figures mean nothing
    out: Path = Path("bench/results")
    engines: list[str] = field(default_factory=lambda: ["aio"])
    peers: list[str] | None = None  # None: every peer the workload knows
    workdir: Path | None = None  # where data files go (a real disk: O_DIRECT needs one)
    notice: Callable[[str], None] = print  # one-line notices (skipped peers, ...)
    # progress(total_steps_delta, advance): workloads report steps so the CLI can draw a bar.
    progress: Callable[[int, int], None] = lambda total, advance: None

    def wants(self, peer: str) -> bool:
        """Whether the user asked for `peer` (``--peers``); ringio is always wanted."""
        return self.peers is None or peer in self.peers


@dataclass
class Row:
    """One measured point: who, with which parameters, and the figures."""

    contender: str
    params: dict[str, Any]
    metrics: dict[str, float | int | None]


@dataclass
class Table:
    """One sub-experiment; rendered as one Markdown table and one chart panel."""

    title: str
    metric: str  # the metric the ratio and the chart use
    baseline: str  # contender the ratio column divides by (same params)
    higher_is_better: bool
    rows: list[Row] = field(default_factory=list)
    note: str = ""  # one line printed under the table: what was measured, how
    # Parameters the baseline row is looked up with, over the row's own: e.g.
    # {"qd": 1} compares every queue depth with a blocking loop, which has only qd 1.
    baseline_params: dict[str, Any] = field(default_factory=dict)

    def add(self, contender: str, params: dict[str, Any], **metrics: float | int | None) -> Row:
        row = Row(contender, dict(params), dict(metrics))
        self.rows.append(row)
        return row

    def ratio(self, row: Row) -> float | None:
        """`row`'s metric over the baseline's at the same parameters, with
        `baseline_params` applied (None if no baseline)."""
        want = {**row.params, **self.baseline_params}
        for other in self.rows:
            if other.contender == self.baseline and other.params == want:
                base, mine = other.metrics.get(self.metric), row.metrics.get(self.metric)
                if base and mine is not None:
                    return mine / base
        return None


@dataclass
class WorkloadResult:
    """Everything one workload measured; JSON-serialisable through `to_json`."""

    name: str
    tables: list[Table] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)  # counts, sizes used

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for table, raw in zip(self.tables, data["tables"], strict=True):
            for row, raw_row in zip(table.rows, raw["rows"], strict=True):
                raw_row["ratio_vs_baseline"] = table.ratio(row)
        return data
