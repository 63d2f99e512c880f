"""docs/version-skew.md's tables are the code's: the feature gates by release
(machinery/featuregates.py) and the skew matrix (tests/harness/skew_matrix.py, which derives each
cell from the gates; tests/scenarios/test_version_skew_matrix.py runs the cells)."""

from pathlib import Path

from machinery.featuregates import KNOWN_GATES, Stage, spec_at
from machinery.version import BINARY, FLOOR, Version, skew_violation
from tests.harness import skew_matrix

DOC = Path(__file__).resolve().parents[2] / "docs" / "version-skew.md"
_STAGES = {Stage.ALPHA: "alpha", Stage.BETA: "beta", Stage.GA: "GA", Stage.DEPRECATED: "deprecated"}


def _cell(name: str, release: Version) -> str:
    spec = spec_at(name, release)
    if spec.stage is Stage.PRE_ALPHA:
        return "—"
    return f"{_STAGES[spec.stage]} {'on' if spec.default else 'off'}" + (", locked" if spec.locked else "")


def _tables() -> list[list[list[str]]]:
    """Every table of the doc: its rows (the header first, the --- line left out) as cells."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in DOC.read_text().splitlines() + [""]:
        if line.startswith("| "):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= {"-"} for c in cells):
                current.append(cells)
        elif current:
            tables.append(current)
            current = []
    return tables


def _table() -> tuple[list[str], dict[str, list[str]]]:
    """The gates table: its header, and each gate's cells."""
    table = next(t for t in _tables() if t[0][0] == "gate")
    return table[0], {row[0]: row[1:] for row in table[1:]}


def test_the_docs_table_lists_every_gate_at_every_release_as_the_code_has_it():
    header, rows = _table()
    releases = [Version(1, minor) for minor in range(FLOOR.minor, BINARY.minor + 1)]
    assert header[1:1 + len(releases)] == [str(r) for r in releases] and header[-1] == "read by"
    assert set(rows) == set(KNOWN_GATES)
    for name, cells in rows.items():
        assert cells[:len(releases)] == [_cell(name, r) for r in releases], name


def test_the_docs_skew_matrix_is_the_one_the_gates_make():
    table = next(t for t in _tables() if t[0][:3] == ["apiserver", "scheduler", "kubelet"])
    assert table[0] == ["apiserver", "scheduler", "kubelet", "KEP-1287 flow", "KEP-5836 single victim", "why"]
    want = []
    for cell in skew_matrix.cells():
        e = skew_matrix.expected(cell)
        want.append([str(cell.apiserver), str(cell.scheduler), str(cell.kubelet), e.flow, e.single_victim, e.why])
    assert table[1:] == want


def test_the_matrix_covers_what_the_policy_allows_and_nothing_else():
    for cell in skew_matrix.cells():
        assert skew_violation("kubelet", cell.kubelet, cell.apiserver) is None
        assert skew_violation("kube-scheduler", cell.scheduler, cell.apiserver) is None
    assert len(skew_matrix.cells()) == 3 * 2 * 4  # per apiserver: two scheduler releases, four kubelet ones
