"""Renders the bad-input table (tests/badinput/table.py) as docs/bad-input.md.

    python tools/badinput_table.py          # rewrite docs/bad-input.md
    python tools/badinput_table.py --check  # exit 1 if the doc is out of date

tests/badinput/test_doc_sync.py runs the check, so the doc cannot drift from the
table that the suite runs.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "bad-input.md"

HEADER = """# Bad input: what every public call does with it

Generated from `tests/badinput/table.py` by `tools/badinput_table.py`; do not edit.
`pytest tests/badinput` runs every row (rows marked *per engine* once on each file
engine: `uring`, `aio`, `thread`). Each row must end in the exception shown, or the
documented result, and leave the process healthy: afterwards a good call of the same
API must work, and no fd may be left open. Rows marked *isolated* run in a child
interpreter, so a crash or a hang fails that row only.

Conventions: `OSError (EXXX)` is the kernel refusing (check `e.errno`); `TypeError` and
`ValueError` are misuse found before anything reaches the kernel; `OverflowError` is an
int beyond what the kernel ABI takes (as in `os`). Ops of `ringio.aio`/`ringio.uring`
report the kernel's refusal either from `submit` (kernel AIO checks at io_submit) or in
the completion (`Completion.res` is `-errno`, `Completion.result()` raises it).

Fixture names in the calls: `fd`/`rofd`/`wofd` (an 8 KiB file read-write / read-only /
write-only), `dirfd` (a directory), `badfd` (a number that is not open), `rpipe`/`wpipe`,
`s1`/`s2` (a connected socketpair), `listener`, `unconnected`, `closed_sock`, `udp`,
`pyfile` (a builtin file object), `ro`/`rmv` (read-only bytes / memoryview), `nc` (a
non-contiguous view), `big` = 2**63-1, `huge` = 2**64, `path`/`missing`/`newpath`/`tmp`;
`ctx`, `ring`, `actx`, `lctx`, `cctx`, `w`, `loop` and their `closed_*` twins;
`f`/`fr`/`fw`/`fc` are ringio files opened read-write / read-only / write-only / closed.
`aiofiles` is `ringio.compat.aiofiles` (its rows expect what aiofiles 25.1 raises for
the same call; a case says where ringio differs on purpose), `lab` is
`ringio.compat.linux_aio_bind`. In the `ringio.tempfile` rows: `ntf` (a named temporary
file), `sp`/`spr` (a spooled file in memory / rolled over to a file), `spc`/`sprc`
(the same, closed), `td` (a temporary directory). `scenarios.*` are the multi-step cases
in `tests/badinput/scenarios.py`. `filename=X`: the exception's `filename` must be the
fixture `X` (as os puts the path in it).

`tests/badinput/test_coverage.py` checks that every public callable has rows here, or
an exemption with its reason.
"""


def render() -> str:
    sys.path.insert(0, str(ROOT))
    from tests.badinput.table import CASES

    runs = sum(3 if c.per_engine else 1 for c in CASES)
    lines = [
        HEADER,
        f"{len(CASES)} rows, {runs} runs.\n",
        "## Rows per API\n",
        "| API | rows |",
        "|---|--:|",
    ]
    for api, n in sorted(Counter(c.api for c in CASES).items()):
        lines.append(f"| `{api}` | {n} |")
    order: dict[str, int] = {}
    for c in CASES:
        order.setdefault(c.api, len(order))
    current = None
    for c in sorted(CASES, key=lambda c: order[c.api]):  # stable: table order per API
        if c.api != current:
            current = c.api
            lines += ["", f"## `{c.api}`", "", "| case | call | expected |", "|---|---|---|"]
        notes = [n for n, on in (("per engine", c.per_engine), ("isolated", c.isolate)) if on]
        expected = c.expect_name + (f" ({', '.join(notes)})" if notes else "")
        call = c.call.replace("|", "\\|")
        lines.append(f"| {c.case} | `{call}` | {expected} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not DOC.exists() or DOC.read_text() != text:
            print(f"{DOC} is out of date: run python tools/badinput_table.py")
            return 1
        return 0
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
