"""Headless Chromium for tests that look at a page kplane writes (``kplane timeline``): the
browser run on a page, and the elements of the DOM it built."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest


def _chromium() -> str:
    found = shutil.which("chromium")
    if not found:
        pytest.fail("chromium not found on PATH: install Debian's chromium package (`make install` does it, "
                    "tools/install_chromium.sh)")
    return found


def browser(*args: str, profile: Path) -> subprocess.CompletedProcess:
    return subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                           *args], capture_output=True, text=True, timeout=60)


class Elements(HTMLParser):
    """Every element of a page: (tag, attributes), with ``in-pod`` added: the ``data-pod`` of the
    pod it is drawn in."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str]]] = []
        self.open: list[tuple[str, str]] = []  # (tag, the pod it is in)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        a["in-pod"] = a.get("data-pod") or (self.open[-1][1] if self.open else "")
        self.found.append((tag, a))
        self.open.append((tag, a["in-pod"]))

    def handle_endtag(self, tag: str) -> None:
        while self.open and self.open.pop()[0] != tag:
            pass

    def having(self, cls: str, **data: str) -> list[dict[str, str]]:
        """The elements whose class list has all of ``cls``'s classes and whose ``data-*``
        attributes (``data_pod="x"`` for ``data-pod``; ``in_pod``) are as given."""
        want = set(cls.split())
        return [a for _, a in self.found if want <= set(a.get("class", "").split())
                and all(a.get(k.replace("_", "-")) == v for k, v in data.items())]
