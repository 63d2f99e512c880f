"""``kplane timeline``: the cluster's history drawn as a picture of a race — one lane per node,
each pod's life a bar of phases with its resizes, preemptions as arrows, faults as marks — as SVG
or as one self-contained HTML page.

``model`` reads the history into lanes, bars and marks; ``svg`` draws them; ``command`` is the
command line (the history from the cluster or a file, the file written atomically). ``render`` is
what a chaos run calls to draw a failing run's history beside its log.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Final

from cli.check.framework import Entry
from cli.timeline import model, svg

FORMATS: Final = ("html", "svg")


def render(entries: Iterable[Entry], fmt: str, since: int = 0, until: int | None = None,
           pods: Collection[str] = ()) -> str:
    """The timeline of ``entries`` (revision order) as ``fmt`` (``html`` or ``svg``) text; see
    ``model.build`` for ``since``, ``until`` and ``pods``."""
    return draw(model.build(entries, since=since, until=until, pods=pods), fmt)


def draw(t: model.Timeline, fmt: str) -> str:
    """``t`` as ``fmt`` (``html`` or ``svg``) text."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown timeline format {fmt!r} (html or svg)")
    return svg.render_html(t) if fmt == "html" else svg.render_svg(t)
