"""The echo benchmark workload runs (smoke counts, ringio only: no Go needed)."""

from __future__ import annotations

from pathlib import Path

from ringio.bench.model import Options
from ringio.bench.workloads import echo


def test_echo_workload_smoke(tmp_path: Path) -> None:
    notices: list[str] = []
    result = echo.run(Options(smoke=True, out=tmp_path, peers=[], notice=notices.append))
    assert not notices, notices
    figures = {t.metric: t.rows[0].metrics[t.metric] for t in result.tables}
    assert [t.rows[0].contender for t in result.tables] == ["ringio.Watcher"] * 3
    assert figures["mb_per_s"] > 0
    assert 0 < figures["seconds"] < 30
    # 100 smoke connections move RSS by less than its page granularity: only the
    # bound is meaningful here (the quick and full runs use 10,000).
    assert 0 <= figures["rss_per_conn_bytes"] < 100_000
