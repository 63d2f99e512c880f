"""``make lint``'s check of the history: every commit after ``BASELINE`` has a subject a reader can
follow in ``git log --oneline`` — at most 72 characters, shaped ``area: what changed`` (the area
a path or a name of a word or two: ``scheduler/queue``, ``make image``, ``tests, docs``), with the
why in the body.

``python tools/check_commits.py [--base REV]``: exit 1 listing the subjects that are not.
Outside a git checkout (an unpacked release), or in a shallow clone without ``BASELINE``, there
is no history to check: it says so and exits 0.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The last commit before the rule: the history before it was written without it.
BASELINE = "902ed31"
MAX_SUBJECT = 72
# A path or name, or two words ("make image"); several joined by ", " ("tests, docs").
_ITEM = r"[A-Za-z0-9_./-]+(?: [A-Za-z0-9_./-]+)?"
AREA = re.compile(rf"^{_ITEM}(?:, {_ITEM})*: \S")


def problems(subject: str) -> list[str]:
    out = []
    if len(subject) > MAX_SUBJECT:
        out.append(f"{len(subject)} characters (at most {MAX_SUBJECT})")
    if not AREA.match(subject):
        out.append("not `area: what changed`")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tools/check_commits.py", description=__doc__.splitlines()[0])
    p.add_argument("--base", default=BASELINE)
    a = p.parse_args(argv)
    known = subprocess.run(["git", "cat-file", "-e", f"{a.base}^{{commit}}"], cwd=ROOT, capture_output=True, text=True)
    if known.returncode != 0:
        if "not a git repository" in known.stderr:
            return 0
        print(f"commit subjects not checked: {a.base} is not in this clone's history (a shallow clone)")
        return 0
    log = subprocess.run(["git", "log", "--no-merges", "--format=%h%x00%s", f"{a.base}..HEAD"], cwd=ROOT,
                         capture_output=True, text=True)
    if log.returncode != 0:
        if "not a git repository" in log.stderr:
            return 0
        print(f"error: git log {a.base}..HEAD: {log.stderr.strip()}", file=sys.stderr)
        return 1
    bad = []
    for line in log.stdout.splitlines():
        sha, _, subject = line.partition("\0")
        for why in problems(subject):
            bad.append(f"{sha} {subject!r}: {why}")
    for b in bad:
        print(b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
