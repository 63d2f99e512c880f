"""docs/version-skew.md's table of feature gates by release is the code's (machinery/featuregates.py)."""

from pathlib import Path

from machinery.featuregates import KNOWN_GATES, Stage, spec_at
from machinery.version import BINARY, FLOOR, Version

DOC = Path(__file__).resolve().parents[2] / "docs" / "version-skew.md"
_STAGES = {Stage.ALPHA: "alpha", Stage.BETA: "beta", Stage.GA: "GA", Stage.DEPRECATED: "deprecated"}


def _cell(name: str, release: Version) -> str:
    spec = spec_at(name, release)
    if spec.stage is Stage.PRE_ALPHA:
        return "—"
    return f"{_STAGES[spec.stage]} {'on' if spec.default else 'off'}" + (", locked" if spec.locked else "")


def _table() -> tuple[list[str], dict[str, list[str]]]:
    lines = [line for line in DOC.read_text().splitlines() if line.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:  # (after the header and its --- line)
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return header, rows


def test_the_docs_table_lists_every_gate_at_every_release_as_the_code_has_it():
    header, rows = _table()
    releases = [Version(1, minor) for minor in range(FLOOR.minor, BINARY.minor + 1)]
    assert header[1:1 + len(releases)] == [str(r) for r in releases] and header[-1] == "read by"
    assert set(rows) == set(KNOWN_GATES)
    for name, cells in rows.items():
        assert cells[:len(releases)] == [_cell(name, r) for r in releases], name
