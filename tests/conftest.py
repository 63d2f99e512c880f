"""pytest's registration of the test harness (tests/harness/): its fixtures and hooks, imported by
name so pytest finds them here. What they do is in the harness modules."""

from __future__ import annotations

from tests.harness.cluster import client, kcluster, pytest_runtest_makereport
from tests.harness.skips import pytest_runtest_logreport, pytest_sessionfinish, pytest_terminal_summary
from tests.harness.timeouts import pytest_timeout_set_timer

__all__ = ["client", "kcluster", "pytest_runtest_logreport", "pytest_runtest_makereport", "pytest_sessionfinish",
           "pytest_terminal_summary", "pytest_timeout_set_timer"]
