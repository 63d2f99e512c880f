"""Microbenchmark: each candidate module's hot path, pure Python against its mypyc build.

    python tools/bench_mypyc.py [ROUNDS]

Imports every candidate the normal way (its compiled build when one is present) and a second,
pure copy from its .py file, then times the same calls on both, alternating rounds, in CPU time
(time.process_time). Prints, per hot path, the best round of each and their ratio (docs/performance.md, "mypyc").
No cluster, no I/O: safe on a machine where others measure.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from types import ModuleType

from machinery.api import core_pb2
from tests.harness.builders import MakeNode, MakePod

Case = Callable[[ModuleType], Callable[[], object]]


def _pure(name: str) -> ModuleType:
    """A second copy of module ``name`` run from its source, whatever the normal import finds."""
    package, leaf = name.rsplit(".", 1)
    source = f"{os.path.dirname(importlib.import_module(package).__file__ or '')}/{leaf}.py"
    spec = importlib.util.spec_from_file_location(f"_pure_{name.replace('.', '_')}", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _pod() -> core_pb2.Pod:
    return (MakePod().name("web-0").label("app", "web").label("tier", "front")
            .container("app", cpu="500m", memory="512Mi").container("log", cpu="100m", memory="64Mi")
            .init_container("init", cpu="1", memory="128Mi").obj())


def _node() -> core_pb2.Node:
    return MakeNode().name("n1").capacity({"cpu": "8", "memory": "32Gi", "pods": "110"}).obj()


def _fit(m: ModuleType) -> Callable[[], object]:
    alloc = m.Resource.of({"cpu": 8000, "memory": 32 << 30, "pods": 110, "example.com/gpu": 4})
    used = m.Resource.of({"cpu": 7800, "memory": 30 << 30, "example.com/gpu": 4})
    req = {"cpu": 500, "memory": 512 << 20, "example.com/gpu": 1}

    def run() -> object:
        return m.fits_request(m.Resource.of(req), alloc, used, 12)

    return run


def _selectors(m: ModuleType) -> Callable[[], object]:
    sel = m.parse_label_selector("app=web,tier in (front,back),!canary")
    labels = {"app": "web", "tier": "front", "pod-template-hash": "abc"}
    return lambda: (sel.matches(labels), m.parse_label_selector("app=web,tier in (front,back),!canary"))


def _jsonconv(m: ModuleType) -> Callable[[], object]:
    pod = _pod()
    return lambda: m.to_dict(pod)


CASES: dict[str, tuple[str, Case]] = {
    "fit.fits_request": ("machinery.fit", _fit),
    "selectors.parse+matches": ("machinery.selectors", _selectors),
    "jsonconv.to_dict(pod)": ("machinery.jsonconv", _jsonconv),
}


def _round(fn: Callable[[], object], n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - start) / n


def main(argv: list[str]) -> None:
    rounds = int(argv[0]) if argv else 7
    only = argv[1:]
    for label, (name, case) in CASES.items():
        if only and label not in only:
            continue
        compiled = importlib.import_module(name)
        kind = "compiled" if (compiled.__file__ or "").endswith(".so") else "PURE (no build)"
        fast, slow = case(compiled), case(_pure(name))
        n = max(1, int(0.05 / max(_round(slow, 200), 1e-9)))
        best: dict[str, float] = {"pure": float("inf"), "compiled": float("inf")}
        for _ in range(rounds):
            best["pure"] = min(best["pure"], _round(slow, n))
            best["compiled"] = min(best["compiled"], _round(fast, n))
        ratio = best["pure"] / best["compiled"]
        print(f"{label:36} pure {best['pure'] * 1e6:8.2f} us  {kind} {best['compiled'] * 1e6:8.2f} us  "
              f"x{ratio:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
