"""Fixtures for ringio.os tests: the engine fixtures, and trees to compare on."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.engines.conftest import engine, engine_name, event_loop_policy  # noqa: F401
from tests.os.reference import Tree, open_tree


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Tree]:
    t = open_tree(tmp_path / "tree")
    yield t
    os.close(t.fd)


@pytest.fixture
def twins(tmp_path: Path) -> Iterator[tuple[Tree, Tree]]:
    """Two identical trees: os changes the first, ringio the second."""
    ref, got = open_tree(tmp_path / "ref"), open_tree(tmp_path / "got")
    yield ref, got
    os.close(ref.fd)
    os.close(got.fd)


@pytest.fixture
def fresh_twins(tmp_path: Path) -> Iterator[Callable[[], tuple[Tree, Tree]]]:
    """Makes a new pair of identical trees per call (one per case of a test)."""
    made: list[Tree] = []

    def make() -> tuple[Tree, Tree]:
        base = tmp_path / f"case{len(made) // 2}"
        base.mkdir()
        pair = open_tree(base / "ref"), open_tree(base / "got")
        made.extend(pair)
        return pair

    yield make
    for t in made:
        os.close(t.fd)
