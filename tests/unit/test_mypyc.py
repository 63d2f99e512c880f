"""The mypyc-compiled modules (machinery.COMPILED, tools/build_mypyc.py): in use unless
KPLANE_PURE_PYTHON=1, and giving the same answers as their pure-Python sources.

No skip: where `make install` ran with a C compiler (CI), a missing build is a failure.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from types import ModuleType

import pytest

import machinery
from machinery.api import core_pb2, meta_pb2
from tests.harness.builders import MakeNode, MakePod

PURE = os.environ.get("KPLANE_PURE_PYTHON") == "1"


def _pure(name: str) -> ModuleType:
    """A second copy of ``machinery.<name>`` run from its .py file."""
    spec = importlib.util.spec_from_file_location(f"_pure_{name}", f"{os.path.dirname(machinery.__file__)}/{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", machinery.COMPILED)
def test_compiled_module_in_use_unless_pure(name: str) -> None:
    path = importlib.import_module(f"machinery.{name}").__file__ or ""
    if PURE:
        assert path.endswith(f"{name}.py")
    else:
        assert path.startswith(str(machinery.COMPILED_DIR)) and path.endswith(".so"), (
            f"machinery.{name} is not the mypyc build ({path}): run `make install` (tools/build_mypyc.py)")


def test_kplane_pure_python_makes_a_process_use_the_sources() -> None:
    code = "import machinery.fit, machinery.jsonconv, machinery.selectors as s; print(s.__file__)"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "KPLANE_PURE_PYTHON": "1"},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("machinery/selectors.py")


def _resources(m: ModuleType) -> list[object]:
    rls = [{}, {"cpu": 500}, {"cpu": 8000, "memory": 32 << 30, "pods": 110, "example.com/gpu": 4,
                              "hugepages-2Mi": 1 << 30, "ephemeral-storage": 10 << 30},
           {"cpu": 7900, "memory": 31 << 30, "example.com/gpu": 4, "kubernetes.io/x": 3, "pods": 2}]
    out: list[object] = []
    for r in rls:
        for a in rls:
            for u in rls:
                request, alloc, used = m.Resource.of(r), m.Resource.of(a), m.Resource.of(u)
                for pods in (None, 0, 109, 110):
                    out.append([tuple(i) for i in m.fits_request(request, alloc, used, pods)])
                out.append([tuple(i) for i in m.fits_request(request, alloc, used, 1, frozenset({"example.com/gpu"}),
                                                             frozenset({"example.com"}))])
                c = used.clone()
                c.add(r, -1)
                out.append((c.as_dict(), repr(c), [c.get(k) for k in ("cpu", "memory", "pods", "example.com/gpu")]))
    return out


def test_fit_matches_pure() -> None:
    assert _resources(importlib.import_module("machinery.fit")) == _resources(_pure("fit"))


_SELECTORS = ["", "app=web", "app==web,tier!=back", "tier in (front, back),!canary", "env notin (prod)", "gpu",
              "count>3", "count<10", "a=b,c in (d,e),f,!g,h>1", "in", "a in (", "a=b=c", "!", "x>y", "a,b,", "Ä=1",
              "a" * 64 + "=b", "app.kubernetes.io/name=web", "app=" + "v" * 64]
_LABELS = [{}, {"app": "web"}, {"app": "web", "tier": "front", "count": "5"}, {"canary": "", "gpu": "1"},
           {"env": "dev", "count": "x", "a": "b", "c": "e", "f": "", "h": "2"}]


def _selector_results(m: ModuleType) -> list[object]:
    out: list[object] = []
    for text in _SELECTORS:
        try:
            sel = m.parse_label_selector(text)
        except ValueError as e:
            out.append(("error", type(e).__name__, str(e)))
            continue
        out.append((str(sel), sel.empty, [sel.matches(labels) for labels in _LABELS]))
    ls = meta_pb2.LabelSelector(match_labels={"app": "web"})
    ls.match_expressions.add(key="tier", operator="In", values=["front", "back"])
    ls.match_expressions.add(key="canary", operator="DoesNotExist")
    out.append((m.format_label_selector(ls), m.label_selector_as_selector(ls).matches({"app": "web", "tier": "back"}),
                str(m.from_label_selector_message(None))))
    for text in ("metadata.name=web-0", "spec.nodeName!=n1,metadata.namespace=default", "status.phase=Running",
                 "metadata.name=a\\,b", "nope=1"):
        try:
            fs = m.parse_field_selector(text, "Pod", core_pb2.Pod.DESCRIPTOR)
        except ValueError as e:
            out.append(("error", type(e).__name__, str(e)))
            continue
        pod = MakePod().name("web-0").node("n2").obj()
        out.append((str(fs), fs.matches(pod), fs.value_of("metadata.name")))
    return out


def test_selectors_match_pure() -> None:
    assert _selector_results(importlib.import_module("machinery.selectors")) == _selector_results(_pure("selectors"))


def _json_results(m: ModuleType) -> list[object]:
    pod = (MakePod().name("web-0").label("app", "web").annotation("a", "b").owner("ReplicaSet", "rs", "u1")
           .container("app", cpu="500m", memory="512Mi").lim(cpu="1").port(8080, 80)
           .init_container("init", cpu="1").sidecar("log", memory="64Mi").node("n1").priority(5).obj())
    node = MakeNode().name("n1").capacity({"cpu": "8", "memory": "32Gi", "pods": "110"}).obj()
    out: list[object] = []
    for msg in (pod, node, core_pb2.Pod(), core_pb2.Node()):
        d = m.to_dict(msg)
        back = m.from_dict(type(msg), d)
        out.append((d, back == msg, m.to_dict(msg, {"Pod": ("spec",)})))
    for bad in ({"spec": {"containers": "x"}}, {"metadata": {"labels": {"a": 1}}}, {"spec": {"priority": "high"}},
                {"nope": 1}, []):
        try:
            m.from_dict(core_pb2.Pod, bad)
            out.append("accepted")
        except ValueError as e:
            out.append((type(e).__name__, str(e)))
    out.append(m.prune_unknown(core_pb2.Pod, {"metadata": {"name": "a", "x": 1}, "y": 2}))
    return out


def test_jsonconv_matches_pure() -> None:
    assert _json_results(importlib.import_module("machinery.jsonconv")) == _json_results(_pure("jsonconv"))
