"""The kplane command against a real cluster: the Foundation acceptance walk-through and bad input.

Every bad input must give a non-zero exit, exactly one clear line on stderr (no traceback), and
change nothing: the cluster's revision is the same before and after.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.harness.builders import MakePod
from tests.harness.cluster import ROOT, cluster_fixture
from tests.harness.wait import DEADLINE_SCALE

pytestmark = pytest.mark.integration


def _revision(kcluster) -> int:
    out = kcluster.kplane("history")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    return json.loads(lines[-1])["rev"] if lines else 0


def _fails_cleanly(kcluster, result, *fragments: str) -> None:
    assert result.returncode != 0, f"expected failure, got: {result.stdout}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"want one line on stderr, got:\n{result.stderr}"
    assert "Traceback" not in result.stderr
    for f in fragments:
        assert f in lines[0], f"{f!r} not in {lines[0]!r}"


def test_foundation_acceptance_apply_get_history(kcluster, tmp_path):
    """Issue 2: apply a PriorityClass and a Kubernetes-style Pod; get -o json shows Kubernetes JSON
    with spec.priority resolved and status.qosClass set; history shows both creates."""
    example = ROOT / "examples" / "pod.yaml"
    out = kcluster.kplane("apply", "-f", str(example))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["priorityclass.scheduling.k8s.io/high-priority created", "pod/web created"]

    out = kcluster.kplane("get", "pods", "-o", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["kind"] == "List"
    web = next(p for p in doc["items"] if p["metadata"]["name"] == "web")
    assert web["apiVersion"] == "v1" and web["kind"] == "Pod"
    assert web["spec"]["priority"] == 1000000
    assert web["spec"]["priorityClassName"] == "high-priority"
    assert web["status"]["qosClass"] == "Burstable"
    assert web["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "1"
    assert web["spec"]["containers"][0]["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert web["metadata"]["generation"] == 1  # int64 fields print as numbers, as Kubernetes does

    out = kcluster.kplane("get", "pod", "web", "-o", "json")
    assert json.loads(out.stdout)["metadata"]["name"] == "web"

    out = kcluster.kplane("history")
    assert out.returncode == 0, out.stderr
    entries = [json.loads(line) for line in out.stdout.splitlines()]
    creates = [(e["type"], e["kind"], e["name"]) for e in entries if e["name"] in ("high-priority", "web")]
    assert creates == [("ADDED", "PriorityClass", "high-priority"), ("ADDED", "Pod", "web")]
    assert entries[-1]["object"]["metadata"]["resourceVersion"] == str(entries[-1]["rev"])

    # Applying the same file again changes nothing.
    out = kcluster.kplane("apply", "-f", str(example))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["priorityclass.scheduling.k8s.io/high-priority unchanged", "pod/web unchanged"]

    table = kcluster.kplane("get", "pods")
    assert table.stdout.splitlines()[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert any(line.split()[:3] == ["web", "0/1", "Pending"] for line in table.stdout.splitlines())


def test_apply_updates_labels_and_keeps_server_filled_fields(kcluster, tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: relabel, labels: {a: '1'}}\n"
                 "spec: {containers: [{name: c, image: nginx}]}\n")
    assert kcluster.kplane("apply", "-f", str(f)).returncode == 0
    f.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: relabel, labels: {b: '2'}}\n"
                 "spec: {containers: [{name: c, image: nginx}]}\n")
    out = kcluster.kplane("apply", "-f", str(f))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "pod/relabel configured"
    pod = json.loads(kcluster.kplane("get", "pod", "relabel", "-o", "json").stdout)
    assert pod["metadata"]["labels"] == {"b": "2"}


def test_resize_patch_delete_and_evict_commands(kcluster, tmp_path):
    f = tmp_path / "r.yaml"
    f.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: cli-rs}\nspec:\n  containers:\n"
                 "  - {name: c, image: nginx, resources: {requests: {cpu: 100m}, limits: {cpu: 500m}}}\n")
    assert kcluster.kplane("apply", "-f", str(f)).returncode == 0
    out = kcluster.kplane("resize", "pod", "cli-rs", "--cpu", "200m")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "pod/cli-rs resized"
    pod = json.loads(kcluster.kplane("get", "pod", "cli-rs", "-o", "json").stdout)
    assert pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "200m"
    out = kcluster.kplane("patch", "pod", "cli-rs", "-p", '{"metadata":{"labels":{"p":"1"}}}')
    assert out.returncode == 0 and out.stdout.strip() == "pod/cli-rs patched"
    out = kcluster.kplane("patch", "pod", "cli-rs", "--subresource", "resize", "-p",
                          '{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1"}}}]}}')
    assert out.returncode == 0, out.stderr
    out = kcluster.kplane("evict", "pod", "cli-rs")
    assert out.returncode == 0 and out.stdout.strip() == "pod/cli-rs evicted"
    out = kcluster.kplane("get", "pod", "cli-rs")
    _fails_cleanly(kcluster, out, "NotFound", 'pods "cli-rs" not found')
    assert kcluster.kplane("delete", "pod", "web").returncode in (0, 1)


def test_status_reports_each_component(kcluster):
    out = kcluster.kplane("status", "-o", "json")
    assert out.returncode == 0, out.stderr
    comps = {c["name"]: c for c in json.loads(out.stdout)["components"]}
    assert set(comps) >= {"etcd", "apiserver"}
    for c in comps.values():
        assert set(c) >= {"name", "pid", "grpc", "admin", "healthy"}
        assert c["healthy"] is True and c["pid"]


# ---------------------------------------------------------------- bad input


def _write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    return str(p)


POD = ("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\n"
       "spec:\n  containers:\n  - name: c\n    image: nginx\n{extra}")

BAD_DOCUMENTS = [
    ("malformed-yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: x\n", ["error parsing"]),
    ("malformed-json", '{"apiVersion": "v1", "kind": "Pod",', ["error parsing"]),
    ("unknown-kind", "apiVersion: v1\nkind: Potato\nmetadata: {name: x}\n", ['no matches for kind "Potato"']),
    ("unknown-field", POD.format(name="x", extra="    colour: red\n"), ['unknown field "spec.containers[0].colour"']),
    ("invalid-name", POD.format(name="Not_A_Name", extra=""), ["metadata.name", "Invalid value"]),
    ("bad-quantity-1.5.5", POD.format(name="q1", extra="    resources: {requests: {cpu: 1.5.5}}\n"),
     ["quantities must match the regular expression"]),
    ("bad-quantity-negative", POD.format(name="q2", extra="    resources: {requests: {cpu: '-1'}}\n"),
     ["must be greater than or equal to 0"]),
    ("bad-quantity-10Qi", POD.format(name="q3", extra="    resources: {requests: {memory: 10Qi}}\n"),
     ["quantities must match the regular expression"]),
    ("limits-below-requests",
     POD.format(name="q4", extra="    resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}\n"),
     ["must be less than or equal to cpu limit"]),
    ("unknown-priority-class", POD.format(name="pcx", extra="  priorityClassName: no-such-class\n").replace(
        "  priorityClassName", "  priorityClassName", 1), ["no PriorityClass with name no-such-class was found"]),
    ("second-document-invalid", "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: ok-pc}\n"
     "value: 5\n---\n" + POD.format(name="Bad_Name", extra=""), ["Invalid value"]),
]


@pytest.mark.parametrize("name,text,fragments", BAD_DOCUMENTS, ids=[b[0] for b in BAD_DOCUMENTS])
def test_bad_documents_are_rejected_and_change_nothing(kcluster, tmp_path, name, text, fragments):
    before = _revision(kcluster)
    out = kcluster.kplane("apply", "-f", _write(tmp_path, text))
    _fails_cleanly(kcluster, out, *fragments)
    assert _revision(kcluster) == before


def test_stale_resource_version_in_apply_conflicts(kcluster, tmp_path):
    assert kcluster.kplane("apply", "-f", _write(tmp_path, POD.format(name="stale-cli", extra=""))).returncode == 0
    before = _revision(kcluster)
    doc = POD.format(name="stale-cli", extra="").replace("metadata: {name: stale-cli}",
                                                         "metadata: {name: stale-cli, resourceVersion: '1'}")
    out = kcluster.kplane("apply", "-f", _write(tmp_path, doc))
    _fails_cleanly(kcluster, out, "Conflict")
    assert _revision(kcluster) == before


def test_server_side_apply_from_two_managers_conflicts_and_force_takes_the_field(kcluster, tmp_path):
    """kplane apply --server-side: alice's label; bob's other value is kubectl's conflict message
    (exit 1, nothing written, not even bob's other label); --force-conflicts hands it over; a
    partial document (labels only) merges into the pod; --force-conflicts alone is a usage error."""
    def apply(manager: str, labels: str, *extra: str):
        doc = POD.format(name="ssa-cli", extra="").replace("metadata: {name: ssa-cli}",
                                                           f"metadata: {{name: ssa-cli, labels: {{{labels}}}}}")
        return kcluster.kplane("apply", "--server-side", "--field-manager", manager, *extra, "-f",
                               _write(tmp_path, doc))

    out = apply("alice", "tier: a")
    assert out.returncode == 0 and out.stdout.strip() == "pod/ssa-cli serverside-applied", out.stderr
    before = _revision(kcluster)
    out = apply("bob", "tier: b, team: x")
    assert out.returncode == 1, out.stdout
    assert out.stderr.startswith('error: Apply failed with 1 conflict: conflict with "alice": '
                                 '.metadata.labels.tier'), out.stderr
    assert "--force-conflicts" in out.stderr and "Traceback" not in out.stderr
    assert _revision(kcluster) == before
    assert apply("bob", "tier: b, team: x", "--force-conflicts").returncode == 0

    async def read():
        c = kcluster.client()
        try:
            return await c.pods.get("ssa-cli")
        finally:
            await c.close()

    import asyncio
    pod = asyncio.run(read())
    assert dict(pod.metadata.labels) == {"tier": "b", "team": "x"}
    owners = {e.manager: json.loads(e.fields_v1) for e in pod.metadata.managed_fields}
    assert "f:tier" in owners["bob"]["f:metadata"]["f:labels"]
    assert "f:labels" not in owners["alice"].get("f:metadata", {})
    partial = "apiVersion: v1\nkind: Pod\nmetadata: {name: ssa-cli, labels: {owner: carol}}\n"
    out = kcluster.kplane("apply", "--server-side", "--field-manager", "carol", "-f", _write(tmp_path, partial))
    assert out.returncode == 0, out.stderr
    assert asyncio.run(read()).metadata.labels["owner"] == "carol"
    # get -o json|yaml leaves managedFields out unless asked, as kubectl does.
    plain = json.loads(kcluster.kplane("get", "pod", "ssa-cli", "-o", "json").stdout)
    assert "managedFields" not in plain["metadata"] and plain["metadata"]["labels"]["owner"] == "carol"
    full = json.loads(kcluster.kplane("get", "pod", "ssa-cli", "-o", "json", "--show-managed-fields").stdout)
    assert {e["manager"] for e in full["metadata"]["managedFields"]} >= {"alice", "bob", "carol"}
    _fails_cleanly(kcluster, kcluster.kplane("apply", "--force-conflicts", "-f", _write(tmp_path, partial)),
                   "--force-conflicts and --field-manager go with --server-side")


def test_resize_that_changes_qos_or_touches_ephemeral_storage_is_rejected(kcluster, tmp_path):
    doc = ("apiVersion: v1\nkind: Pod\nmetadata: {name: rs-bad}\nspec:\n  containers:\n  - name: c\n    image: nginx\n"
           "    resources: {requests: {cpu: 100m, ephemeral-storage: 1Gi}, limits: {cpu: 200m}}\n")
    assert kcluster.kplane("apply", "-f", _write(tmp_path, doc)).returncode == 0
    before = _revision(kcluster)
    out = kcluster.kplane("resize", "pod", "rs-bad", "--cpu", "200m", "--memory", "1Gi", "--limit-memory", "1Gi")
    _fails_cleanly(kcluster, out, "Invalid")
    out = kcluster.kplane("patch", "pod", "rs-bad", "--subresource", "resize", "-p",
                          '{"spec":{"containers":[{"name":"c","resources":{"requests":{"ephemeral-storage":"2Gi"}}}]}}')
    _fails_cleanly(kcluster, out, "only cpu and memory resources are mutable")
    out = kcluster.kplane("resize", "pod", "rs-bad", "--cpu", "1.5.5")
    _fails_cleanly(kcluster, out, "invalid cpu request")
    assert _revision(kcluster) == before


def test_kubelet_token_writing_another_nodes_pod_is_forbidden(kcluster, tmp_path):
    assert kcluster.kplane("apply", "-f", _write(tmp_path, POD.format(name="other-node", extra=""))).returncode == 0
    import asyncio

    async def bind():
        c = kcluster.client()
        try:
            await c.pods.bind("other-node", "node-2")
        finally:
            await c.close()

    asyncio.run(bind())
    before = _revision(kcluster)
    token = kcluster.token_for("system:node:node-1")
    out = kcluster.kplane("--token", token, "patch", "pod", "other-node", "--subresource", "status", "-p",
                          '{"status":{"phase":"Running"}}')
    _fails_cleanly(kcluster, out, "Forbidden", "spec.nodeName set to itself")
    assert _revision(kcluster) == before


def test_request_without_a_valid_token_is_unauthenticated(kcluster):
    out = kcluster.kplane("--token", "wrong", "get", "pods")
    _fails_cleanly(kcluster, out, "Unauthorized")


def test_eviction_blocked_by_a_pdb(kcluster, tmp_path):
    import asyncio

    from tests.harness.builders import make_pdb, mark_running_and_ready

    async def setup():
        c = kcluster.client()
        k = kcluster.client("system:node:node-1")
        try:
            await c.pod_disruption_budgets.create(make_pdb("guard", {"app": "guarded"}, min_available="1"))
            await c.pods.create(MakePod().name("guarded-0").label("app", "guarded").obj())
            pod = await c.pods.bind("guarded-0", "node-1")
            await k.pods.update_status(mark_running_and_ready(pod))
        finally:
            await c.close()
            await k.close()

    asyncio.run(setup())
    before = _revision(kcluster)
    out = kcluster.kplane("evict", "pod", "guarded-0")
    _fails_cleanly(kcluster, out, "TooManyRequests", "disruption budget guard needs 1 healthy pods and has 1 currently")
    assert _revision(kcluster) == before


def test_unknown_kind_and_bad_flags_fail_before_contacting_the_server(kcluster):
    _fails_cleanly(kcluster, kcluster.kplane("get", "potatoes"), 'the server doesn\'t have a resource type "potatoes"')
    _fails_cleanly(kcluster, kcluster.kplane("patch", "pod", "x", "-p", "{nope"), "unable to parse the patch")
    _fails_cleanly(kcluster, kcluster.kplane("kill", "no-such-component"), 'unknown component "no-such-component"')


# ---------------------------------------------------------------- errors that fit


def test_apply_of_a_20kb_label_value_is_one_short_invalid_line(kcluster, tmp_path):
    before = _revision(kcluster)
    doc = POD.format(name="label-20kb", extra="").replace("{name: label-20kb}",
                                                          "{name: label-20kb, labels: {app: " + "v" * 20_000 + "}}")
    out = kcluster.kplane("apply", "-f", _write(tmp_path, doc))
    _fails_cleanly(kcluster, out, "Error from server (Invalid)", 'Pod "label-20kb" is invalid: metadata.labels: '
                   'Invalid value: "vvvv', "(truncated: 20000 characters)")
    assert len(out.stderr) < 1024
    assert _revision(kcluster) == before


def test_apply_of_an_object_over_the_request_limit_is_one_request_entity_too_large_line(kcluster, tmp_path):
    before = _revision(kcluster)
    args = "    args: [" + ", ".join(["a" * 1024] * 4096) + "]\n"  # 4 MiB
    out = kcluster.kplane("apply", "-f", _write(tmp_path, POD.format(name="over-3mib", extra=args)))
    _fails_cleanly(kcluster, out, "Error from server (RequestEntityTooLarge): Request entity too large: "
                   "limit is 3145728")
    assert _revision(kcluster) == before


# ---------------------------------------------------------------- get -w across failures


class _Watcher:
    """``kplane get ... -w`` as a subprocess, its stdout collected line by line."""

    def __init__(self, tc, *args: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "cli", "--data-dir", tc.data_dir, "get", *args, "-w"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, what: str, predicate, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout * DEADLINE_SCALE
        while not predicate(self.lines):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"{what}: not seen (running: {self.proc.poll() is None}); stdout:\n"
                                     + "\n".join(self.lines) + f"\nstderr:\n{self.stop()[1]}")
            time.sleep(0.05)

    def stop(self) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        self._reader.join(5)
        return self.proc.returncode, err


def _apply_pods(tc, tmp_path: Path, *names: str, label: str) -> None:
    docs = "---\n".join(POD.format(name=n, extra="").replace(f"{{name: {n}}}", f"{{name: {n}, labels: {label}}}")
                        for n in names)
    out = tc.kplane("apply", "-f", _write(tmp_path, docs))
    assert out.returncode == 0, out.stderr


def _names(lines: list[str]) -> list[str]:
    return [line.split()[0] for line in lines[1:] if line.strip()]


restartable = cluster_fixture()


def test_get_watch_resumes_across_an_apiserver_restart(restartable, tmp_path):
    """Every pod created before and after `kplane kill apiserver` + `kplane start apiserver` is
    printed once, nothing else is on stdout, and the watch is still running."""
    tc = restartable
    w = _Watcher(tc, "pods", "-l", "watch=restart")
    try:
        w.wait_for("the table header", lambda lines: lines[:1] and lines[0].split()[0] == "NAME")
        _apply_pods(tc, tmp_path, "before-1", "before-2", label="{watch: restart}")
        w.wait_for("the pods created before the restart", lambda lines: _names(lines) == ["before-1", "before-2"])
        assert tc.kplane("kill", "apiserver").returncode == 0
        time.sleep(0.5)
        started = tc.kplane("start", "apiserver")
        assert started.returncode == 0, started.stderr
        _apply_pods(tc, tmp_path, "after-1", "after-2", label="{watch: restart}")
        w.wait_for("the pods created after the restart",
                   lambda lines: _names(lines)[:4] == ["before-1", "before-2", "after-1", "after-2"])
        # One more pod, printed last: a duplicate of an earlier one would have come before it.
        _apply_pods(tc, tmp_path, "sentinel", label="{watch: restart}")
        w.wait_for("the sentinel pod", lambda lines: "sentinel" in _names(lines))
        assert w.proc.poll() is None, "kplane get -w ended"
    finally:
        code, err = w.stop()
    assert _names(w.lines) == ["before-1", "before-2", "after-1", "after-2", "sentinel"]
    assert len(w.lines) == 6 and all(line.split()[1:3] == ["0/1", "Pending"] for line in w.lines[1:])
    assert code == 130
    assert "Traceback" not in err and "resuming from resourceVersion" in err


relisting = cluster_fixture(apiserver_args=["--watch-cache-size=5"])


def test_get_watch_relists_on_gone_and_prints_what_changed(relisting, tmp_path):
    """A watch that cannot deliver while more changes happen than the watch cache keeps comes back
    to a version the apiserver no longer has (410 Gone): it lists again and prints the changes —
    the new pods ADDED, the deleted one DELETED — and none of the pods it printed already."""
    tc = relisting
    w = _Watcher(tc, "pods", "-l", "relist=yes", "-o", "json")

    def events(lines: list[str]) -> list[tuple[str, str]]:
        return [(d["type"], d["object"]["metadata"]["name"])
                for d in map(json.loads, (line for line in lines if line.startswith('{"type"')))]

    try:
        w.wait_for("the initial list", lambda lines: any(line.startswith("}") for line in lines))
        _apply_pods(tc, tmp_path, "r-0", "r-keep", label="{relist: 'yes'}")
        w.wait_for("the first pods", lambda lines: events(lines) == [("ADDED", "r-0"), ("ADDED", "r-keep")])
        assert tc.kplane("failpoint", "apiserver", "apiserver/watch-delivery", "error").returncode == 0
        _apply_pods(tc, tmp_path, *(f"r-{i}" for i in range(1, 11)), label="{relist: 'yes'}")
        assert tc.kplane("delete", "pod", "r-0", "--grace-period", "0").returncode == 0
        assert tc.kplane("failpoint", "apiserver", "apiserver/watch-delivery", "off").returncode == 0
        w.wait_for("the changes after the relist", lambda lines: len(events(lines)) >= 13)
        # One more pod, printed last: a change printed twice would have come before it.
        _apply_pods(tc, tmp_path, "r-sentinel", label="{relist: 'yes'}")
        w.wait_for("the sentinel pod", lambda lines: ("ADDED", "r-sentinel") in events(lines))
        assert w.proc.poll() is None, "kplane get -w ended"
    finally:
        code, err = w.stop()
    seen = events(w.lines)
    assert seen[:2] == [("ADDED", "r-0"), ("ADDED", "r-keep")] and seen[-1] == ("ADDED", "r-sentinel")
    assert sorted(seen[2:-1]) == sorted([("DELETED", "r-0")] + [("ADDED", f"r-{i}") for i in range(1, 11)])
    assert "too old" in err and "listing again" in err
