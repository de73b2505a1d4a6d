"""ringio's benchmark harness: ``python -m ringio bench``. See bench/README.md."""

from .model import Options, Row, Table, WorkloadResult

__all__ = ["Options", "Row", "Table", "WorkloadResult"]
