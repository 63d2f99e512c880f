"""No test skips unless it is on ``ALLOWED`` with the reason it may: a skip for want of a tool the
project can install hides a test CI should run, so ``make test`` fails on one (registered by
tests/conftest.py). An expected failure (xfail) is refused the same way."""

from __future__ import annotations

import fnmatch

import pytest

# Test id pattern (fnmatch) -> why that test may skip where CI runs. Keep every entry commented:
# a skip is allowed only for what no `make install` can provide on the machine CI uses.
ALLOWED: dict[str, str] = {}

_skipped: list[tuple[str, str]] = []


def _reason(report: pytest.TestReport) -> str:
    if hasattr(report, "wasxfail"):
        return f"xfail: {report.wasxfail}"
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not any(fnmatch.fnmatch(report.nodeid, p) for p in ALLOWED):
        _skipped.append((report.nodeid, _reason(report)))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if _skipped:
        terminalreporter.section("skips not on tests/harness/skips.py's ALLOWED list", red=True)
        for nodeid, reason in _skipped:
            terminalreporter.line(f"{nodeid}: {reason}")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _skipped and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
