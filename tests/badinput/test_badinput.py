"""Runs every row of the bad-input table (tests/badinput/table.py) as its own test:
the call must end in the expected exception (or documented result), the process
must stay healthy (the same API works afterwards) and no fd may be left open.
Rows marked isolate run in a child interpreter: a crash or hang fails that row only."""

from __future__ import annotations

import pytest
from tests.engines.conftest import available

from .env import run_case, run_isolated
from .table import CASES

ENGINES = ("uring", "aio", "thread")


def _params() -> list[object]:
    out = []
    for case in CASES:
        for engine in ENGINES if case.per_engine else (None,):
            cid = case.id + (f"[{engine}]" if engine else "")
            out.append(pytest.param(case, engine, id=cid))
    return out


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("case", "engine"), _params())
def test_bad_input(case, engine):
    if engine is not None and (why := available(engine)):
        pytest.skip(f"{engine} engine unavailable: {why}")
    problem = run_isolated(case, engine) if case.isolate else run_case(case, engine)
    assert problem is None, f"{case.call!r} ({case.expect_name}): {problem}"
