"""Kubernetes objects kept as YAML documents in tests/fixtures/ — the manifests of the Kubernetes
docs pages the tests follow, as the pages print them — read by file name."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def fixture(name: str) -> str:
    """The text of ``tests/fixtures/<name>``."""
    return (FIXTURES / name).read_text()
