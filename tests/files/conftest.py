"""Every test here runs against each file engine (uring, aio, thread)."""

from tests.engines.conftest import engine, engine_name, event_loop_policy  # noqa: F401
