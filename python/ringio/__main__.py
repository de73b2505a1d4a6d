"""``python -m ringio ...``: command-line entry points (today: ``bench``)."""

from __future__ import annotations

import sys


def main() -> int:
    # Imported lazily: the benchmark harness needs the `bench` extra (rich, matplotlib),
    # which plain users of ringio do not install.
    try:
        from ringio.bench.cli import main as bench_main
    except ModuleNotFoundError as exc:
        print(f"ringio: {exc.name} is missing; install ringio[bench]", file=sys.stderr)
        return 2
    return bench_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
