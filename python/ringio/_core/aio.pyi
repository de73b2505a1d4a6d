"""Type stubs for ``ringio._core.aio``: the kernel AIO context and the iocb ABI."""

from collections.abc import Iterable
from typing import final

from . import Completion, Op

IOCB_CMD_PREAD: int
IOCB_CMD_PWRITE: int
IOCB_CMD_FSYNC: int
IOCB_CMD_FDSYNC: int
IOCB_CMD_POLL: int
IOCB_CMD_NOOP: int
IOCB_CMD_PREADV: int
IOCB_CMD_PWRITEV: int
IOCB_FLAG_RESFD: int
IOCB_FLAG_IOPRIO: int

@final
class AioContext:
    """A kernel AIO context (io_setup) with its own eventfd."""

    def __init__(self, maxevents: int = 128) -> None: ...
    def submit(self, ops: Iterable[Op]) -> int: ...
    def get_events(
        self, min_nr: int = 1, max_nr: int | None = None, timeout: float | None = None
    ) -> list[Completion]: ...
    def reap(self) -> list[Completion]: ...
    def resolve_futures(self) -> list[Completion]: ...
    def cancel(self, op: Op) -> Completion | None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def in_flight(self) -> int: ...
    @property
    def maxevents(self) -> int: ...
    def fileno(self) -> int: ...
    def __enter__(self) -> AioContext: ...
    def __exit__(self, *exc: object) -> bool: ...

def probe() -> None:
    """Whether this process may use kernel AIO: raises the OSError of a refused
    ``io_setup``. Its context is set up once per process and kept."""
