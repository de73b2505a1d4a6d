"""Fixtures of the reliability tests: the per-engine fixtures run the EIO tests on
every file engine."""

from tests.engines.conftest import engine, engine_name, event_loop_policy  # noqa: F401
