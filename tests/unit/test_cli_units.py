"""Unit tests for the CLI's pure parts: the topology and compose.yaml, apply's document loading,
the invariant checker's rules, tables."""

from __future__ import annotations

import pytest
import yaml

from cli import apply, check, kubeconfig, printers, topology
from cli.main import build_parser, main
from machinery.api import core_pb2
from machinery.client import channel_target
from tests.harness.builders import MakePod
from tests.harness.cluster import ROOT


def test_compose_yaml_is_current_with_the_topology():
    assert (ROOT / "compose.yaml").read_text() == topology.render_compose(), "run `make compose`"
    assert (ROOT / "compose.override.yaml").read_text() == topology.render_compose_override(), "run `make compose`"


def test_compose_publishes_on_127_0_0_1_only_and_only_through_its_override():
    base = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    assert not [n for n, svc in base.items() if "ports" in svc], "compose.yaml publishes: a swarm would use ingress"
    assert all(svc["deploy"]["endpoint_mode"] == "dnsrr" for svc in base.values())
    override = yaml.safe_load((ROOT / "compose.override.yaml").read_text())["services"]
    ports = [p for svc in override.values() for p in svc["ports"]]
    assert "127.0.0.1:6443:6443" in ports and "127.0.0.1:6444:6444" in ports
    assert all(p.startswith("127.0.0.1:") for p in ports)
    assert len({p.split(":")[1] for p in ports}) == len(ports), "two services on one host port"


def test_compose_and_local_topologies_run_the_same_commands():
    cfg = topology.ClusterConfig(data_dir="/d", ports={n: 10000 + i for i, n in enumerate(
        topology.port_names(topology.ClusterConfig()))})
    local = {c.name: c for c in topology.build(cfg, "local")}
    doc = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = doc["services"]
    for name, comp in local.items():
        svc = services[comp.log_name]
        flags = [a for a in svc["command"] if a.startswith("--")]
        assert flags == [a for a in comp.argv if a.startswith("--")], name
        for dep in svc.get("depends_on", {}):
            assert dep in services


def test_three_member_etcd_topology():
    cfg = topology.ClusterConfig(etcd_members=3)
    cfg.ports = {n: 20000 + i for i, n in enumerate(topology.port_names(cfg))}
    comps = topology.build(cfg, "local")
    members = [c for c in comps if c.role == "etcd"]
    assert [m.name for m in members] == ["etcd-1", "etcd-2", "etcd-3"]
    cluster_flag = members[0].argv[members[0].argv.index("--initial-cluster") + 1]
    assert cluster_flag.count("=http://127.0.0.1:") == 3
    api = next(c for c in comps if c.role == "apiserver")
    assert api.argv[api.argv.index("--etcd-endpoints") + 1].count(",") == 2


def test_apiserver_replicas_each_have_their_ports_and_clients_take_turns_with_failover():
    cfg = topology.ClusterConfig(apiservers=3, nodes=4)
    names = topology.port_names(cfg)
    for api in ("apiserver", "apiserver-2", "apiserver-3"):
        assert {f"{api}.grpc", f"{api}.rest", f"{api}.admin"} <= set(names)
    cfg.ports = {n: 10000 + i for i, n in enumerate(names)}
    comps = topology.build(cfg, "local")
    apis = [c.grpc for c in comps if c.role == "apiserver"]
    assert [c.name for c in comps if c.role == "apiserver"] == ["apiserver", "apiserver-2", "apiserver-3"]
    assert len(set(apis)) == 3
    server = {c.name: c.argv[c.argv.index("--server") + 1] for c in comps if "--server" in c.argv}
    a, b, c = apis
    assert server["scheduler"] == server["controller-manager"] == f"{a},{b},{c}"
    assert [server[f"kubelet/node-{i}"] for i in range(1, 5)] == [f"{a},{b},{c}", f"{b},{c},{a}", f"{c},{a},{b}",
                                                                  f"{a},{b},{c}"]


def test_a_client_of_several_apiservers_dials_an_address_list():
    assert channel_target("127.0.0.1:6443") == "127.0.0.1:6443"
    assert channel_target("127.0.0.1:1, localhost:2") == "ipv4:127.0.0.1:1,127.0.0.1:2"
    assert channel_target("[::1]:1,[::1]:2") == "ipv6:[::1]:1,[::1]:2"
    with pytest.raises(ValueError, match="several apiservers need IP addresses, not 'apiserver-2'"):
        channel_target("10.0.0.1:1,apiserver-2:1")


def test_the_kubeconfig_has_a_context_per_apiserver_the_first_current():
    doc = yaml.safe_load(kubeconfig.render("https://127.0.0.1:1", b"CA", "t",
                                           others=[("apiserver-2", "https://127.0.0.1:2")]))
    assert [(c["name"], c["cluster"]["server"]) for c in doc["clusters"]] == [
        ("kplane", "https://127.0.0.1:1"), ("kplane-apiserver-2", "https://127.0.0.1:2")]
    assert [c["name"] for c in doc["contexts"]] == ["kplane", "kplane-apiserver-2"]
    assert doc["current-context"] == "kplane"


def test_nodes_added_and_removed_shape_the_topology_and_survive_cluster_json():
    cfg = topology.ClusterConfig(nodes=3, hollow_nodes=2, node_cpu="4")
    cfg.added_nodes.append(topology.NodeSpec("big", cpu="32", memory="64Gi", pods=50, labels={"zone": "b"},
                                             taints=["gpu=yes:NoSchedule"]))
    cfg.removed_nodes.append("node-2")
    assert [n.name for n in topology.node_specs(cfg)] == ["node-1", "node-3", "big"]
    # Every node needs a token, hollow ones too; the removed one does not.
    assert topology.node_names(cfg) == ["node-1", "node-3", "big", "hollow-node-1", "hollow-node-2"]
    cfg.ports = {n: 30000 + i for i, n in enumerate(topology.port_names(cfg))}
    comps = {c.name: c for c in topology.build(cfg, "local")}
    assert "kubelet/node-2" not in comps and "runtime/node-2" not in comps
    big = comps["kubelet/big"].argv
    assert big[big.index("--cpu") + 1] == "32" and big[big.index("--pods") + 1] == "50"
    assert big[big.index("--node-labels") + 1] == "zone=b"
    assert big[big.index("--register-with-taints") + 1] == "gpu=yes:NoSchedule"
    hollow = comps["hollow-nodes"].argv
    assert hollow[hollow.index("--nodes") + 1] == "2" and hollow[hollow.index("--cpu") + 1] == "4"
    # What cluster.json holds (dataclasses as dicts) reads back the same.
    from dataclasses import asdict
    again = topology.ClusterConfig.from_dict(asdict(cfg))
    assert again == cfg


def test_kplane_help_lists_every_command_of_the_design():
    text = build_parser().format_help()
    for cmd in ("up", "down", "status", "node", "apply", "get", "delete", "patch", "resize", "evict", "kill",
                "start", "restart", "failpoint", "history", "check", "timeline", "explain", "run", "chaos",
                "record", "diff"):
        assert f" {cmd} " in text or f"{{{cmd}," in text or f",{cmd}," in text or f",{cmd}}}" in text, cmd


NAMESPACED = {"apply": ["-f", "x.yaml"], "get": ["pods"], "delete": ["pod", "a"], "patch": ["pod", "a", "-p", "{}"],
              "resize": ["pod", "a", "--cpu", "1"], "evict": ["pod", "a"], "explain": ["pod", "a"]}
NOT_NAMESPACED = {"up": [], "down": [], "status": [], "node": ["add", "n"], "kill": ["scheduler"],
                  "start": ["scheduler"], "restart": ["scheduler"], "failpoint": ["scheduler", "p", "off"],
                  "compose": [], "tokens": [], "history": [], "check": [], "run": ["s.yaml"],
                  "chaos": ["shrink", "s.yaml"], "timeline": ["-o", "x.html"], "record": ["-o", "s.yaml"],
                  "diff": ["a", "b"]}


@pytest.mark.parametrize("command", sorted(NAMESPACED))
def test_commands_that_act_in_a_namespace_take_n(command):
    args = build_parser().parse_args([command, *NAMESPACED[command], "-n", "team-a"])
    assert args.namespace == "team-a"


@pytest.mark.parametrize("command", sorted(NOT_NAMESPACED))
def test_commands_that_act_in_no_namespace_refuse_n_rather_than_ignore_it(command, capsys):
    assert set(NAMESPACED) | set(NOT_NAMESPACED) >= {c for c in build_parser()._subparsers._group_actions[0].choices}
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args([command, *NOT_NAMESPACED[command], "-n", "team-a"])
    assert info.value.code == 2
    assert "unrecognized arguments: -n team-a" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["get", "pods", "web", "-l", "app=web"],
     "error: selectors and the all flag cannot be used when passing resource/name arguments"),
    (["get", "pods", "web", "--field-selector", "spec.nodeName=node-1"],
     "error: selectors and the all flag cannot be used when passing resource/name arguments"),
    (["get", "pods", "web", "-A"], "error: a resource cannot be retrieved by name across all namespaces"),
])
def test_get_by_name_refuses_what_it_would_ignore(argv, message, capsys, tmp_path):
    """kubectl's words; refused before any cluster is looked for (the data dir has none)."""
    assert main(["--data-dir", str(tmp_path), *argv]) == 1
    assert capsys.readouterr().err.strip() == message


def test_tokens_writes_into_kplane_home(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KPLANE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert main(["tokens", "--nodes", "1"]) == 0
    assert (tmp_path / "home" / "tokens.csv").exists() and not (tmp_path / ".kplane").exists()
    assert str(tmp_path / "home") in capsys.readouterr().out


def test_apply_loads_multi_document_yaml_and_lists(tmp_path):
    f = tmp_path / "x.yaml"
    f.write_text("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a}\n"
                 "---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p}\nvalue: 1\n---\n")
    docs = apply.load_documents(str(f))
    assert [(d.kind.name, d.obj.metadata.name) for d in docs] == [("Pod", "a"), ("PriorityClass", "p")]


@pytest.mark.parametrize("text,message", [
    ("", "no objects passed to apply"),
    ("- a\n- b\n", "expected an object"),
    ("kind: Pod\nmetadata: {name: a}\n", "apiVersion and kind must be set"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {}\n", "metadata.name is required"),
    ("apiVersion: v2\nkind: Pod\nmetadata: {name: a}\n", 'no matches for kind "Pod" in version "v2"'),
])
def test_apply_rejects_bad_documents_before_sending_anything(tmp_path, text, message):
    f = tmp_path / "x.yaml"
    f.write_text(text)
    with pytest.raises(apply.ApplyError, match=message):
        apply.load_documents(str(f))


def _entry(rev: int, type_: str, pod: core_pb2.Pod) -> check.Entry:
    return check.Entry(rev, type_, "Pod", pod.metadata.namespace, pod.metadata.name, pod)


def test_check_bound_at_most_once():
    entries = [_entry(1, "ADDED", MakePod().name("a").uid("u1").obj()),
               _entry(2, "MODIFIED", MakePod().name("a").uid("u1").node("n1").obj()),
               _entry(3, "MODIFIED", MakePod().name("a").uid("u1").node("n1").obj())]
    assert check.check_entries(entries, [check.BoundAtMostOnce()]) == []
    entries.append(_entry(4, "MODIFIED", MakePod().name("a").uid("u1").node("n2").obj()))
    [v] = check.check_entries(entries, [check.BoundAtMostOnce()])
    assert v.rev == 4 and "bound to n1 at rev 2 and to n2 at rev 4" in v.message


def test_check_allocated_within_allocatable():
    node = core_pb2.Node()
    node.metadata.name = "n1"
    node.status.allocatable["cpu"] = "2"
    entries = [check.Entry(1, "ADDED", "Node", "", "n1", node),
               _entry(2, "MODIFIED", MakePod().name("a").uid("u1").node("n1").container("c")
                                     .allocated(cpu="1500m").obj()),
               _entry(3, "MODIFIED", MakePod().name("b").uid("u2").node("n1").container("c")
                                     .allocated(cpu="500m").obj())]
    assert check.check_entries(entries, [check.AllocatedWithinAllocatable()]) == []
    entries.append(_entry(4, "MODIFIED", MakePod().name("b").uid("u2").node("n1").container("c")
                                         .allocated(cpu="600m").obj()))
    [v] = check.check_entries(entries, [check.AllocatedWithinAllocatable()])
    assert v.rev == 4 and "cpu 2100 > 2000" in v.message
    entries.append(_entry(5, "DELETED", MakePod().name("a").uid("u1").node("n1").container("c")
                                        .allocated(cpu="1500m").obj()))
    assert [v.rev for v in check.check_entries(entries, [check.AllocatedWithinAllocatable()])] == [4]


def test_check_actuated_within_allocated():
    ok = [_entry(1, "MODIFIED", MakePod().name("a").uid("u1").node("n").container("c").allocated(cpu="1")
                                .actual(cpu="1").obj()),
          _entry(2, "MODIFIED", MakePod().name("a").uid("u1").node("n").container("c").allocated(cpu="1500m")
                                .actual(cpu="1").obj()),
          _entry(3, "MODIFIED", MakePod().name("a").uid("u1").node("n").container("c").allocated(cpu="1500m")
                                .actual(cpu="1500m").obj())]
    assert check.check_entries(ok, [check.ActuatedWithinAllocated()]) == []
    bad = ok + [_entry(4, "MODIFIED", MakePod().name("a").uid("u1").node("n").container("c").allocated(cpu="1500m")
                                      .actual(cpu="2").obj())]
    [v] = check.check_entries(bad, [check.ActuatedWithinAllocated()])
    assert v.rev == 4 and "actual cpu 2000 was never allocated" in v.message


def test_check_bound_requests_within_allocatable():
    node = core_pb2.Node()
    node.metadata.name = "n1"
    node.status.allocatable["cpu"] = "2"
    rule = check.BoundRequestsWithinAllocatable
    entries = [check.Entry(1, "ADDED", "Node", "", "n1", node)]
    # Created unbound, then bound: 1500m + 500m fill the node exactly.
    for rev, (name, cpu) in enumerate((("a", "1500m"), ("b", "500m")), start=2):
        entries += [_entry(rev * 10, "ADDED", MakePod().name(name).uid(name).container("c", cpu=cpu).obj()),
                    _entry(rev * 10 + 1, "MODIFIED", MakePod().name(name).uid(name).node("n1")
                                                     .container("c", cpu=cpu).obj())]
    assert check.check_entries(entries, [rule()]) == []
    over = entries + [_entry(40, "ADDED", MakePod().name("c").uid("c").container("c", cpu="100m").obj()),
                      _entry(41, "MODIFIED", MakePod().name("c").uid("c").node("n1").container("c", cpu="100m").obj())]
    [v] = check.check_entries(over, [rule()])
    assert v.rev == 41 and "pod default/c bound to node n1" in v.message and "cpu 2100 > 2000" in v.message
    # A finished pod no longer holds room; a deleted one neither.
    freed = entries + [_entry(32, "MODIFIED", MakePod().name("a").uid("a").node("n1").container("c", cpu="1500m")
                                              .phase("Failed").obj()),
                       _entry(40, "ADDED", MakePod().name("c").uid("c").container("c", cpu="1500m").obj()),
                       _entry(41, "MODIFIED", MakePod().name("c").uid("c").node("n1")
                                              .container("c", cpu="1500m").obj())]
    assert check.check_entries(freed, [rule()]) == []
    # A pod created with spec.nodeName (the kubelet's to admit) is not a binding, but it counts.
    direct = entries + [_entry(32, "ADDED", MakePod().name("critical").uid("critical").node("n1")
                                            .container("c", cpu="1").obj()),
                        _entry(40, "ADDED", MakePod().name("c").uid("c").container("c", cpu="100m").obj()),
                        _entry(41, "MODIFIED", MakePod().name("c").uid("c").node("n1")
                                               .container("c", cpu="100m").obj())]
    assert [v.rev for v in check.check_entries(direct, [rule()])] == [41]
    # The kubelet's allocation, not a Deferred resize's desired requests, is what a pod holds.
    deferred = entries[:-1] + [_entry(31, "MODIFIED", MakePod().name("b").uid("b").node("n1").container("c", cpu="1")
                                                      .allocated(cpu="500m").obj())]
    assert check.check_entries(deferred, [rule()]) == []
    deferred.append(_entry(40, "ADDED", MakePod().name("c").uid("c").container("c", cpu="100m").obj()))
    deferred.append(_entry(41, "MODIFIED", MakePod().name("c").uid("c").node("n1").container("c", cpu="100m").obj()))
    [v] = check.check_entries(deferred, [rule()])
    assert v.rev == 41 and "cpu 2100 > 2000" in v.message


def test_a_pod_resized_before_its_kubelet_said_what_it_admitted_counts_at_that():
    """pod-8 bound at 500m, resized to 2 cpus before its kubelet reported anything; pod-12 bound
    next to it (the scheduler saw 500m). The history then counts pod-8 at its spec, 2 cpus; the
    kubelet had admitted it at 500m and defers the resize, so the binding over-commits nothing."""
    node = core_pb2.Node()
    node.metadata.name = "n1"
    node.status.allocatable["cpu"] = "2"
    rule = check.BoundRequestsWithinAllocatable
    bound = [check.Entry(1, "ADDED", "Node", "", "n1", node),
             _entry(2, "ADDED", MakePod().name("p8").uid("p8").container("c", cpu="500m").obj()),
             _entry(3, "MODIFIED", MakePod().name("p8").uid("p8").node("n1").container("c", cpu="500m").obj()),
             _entry(4, "MODIFIED", MakePod().name("p8").uid("p8").node("n1").container("c", cpu="2").obj()),
             _entry(5, "ADDED", MakePod().name("p12").uid("p12").container("c", cpu="250m").obj()),
             _entry(6, "MODIFIED", MakePod().name("p12").uid("p12").node("n1").container("c", cpu="250m").obj())]
    [v] = check.check_entries(bound, [rule()])  # nothing reported yet: counted at the spec
    assert v.rev == 6 and "cpu 2250 > 2000" in v.message
    admitted_small = bound + [_entry(7, "MODIFIED", MakePod().name("p8").uid("p8").node("n1").container("c", cpu="2")
                                                    .allocated(cpu="500m").obj())]
    assert check.check_entries(admitted_small, [rule()]) == []
    # Admitted at its resized size, it did hold 2 cpus: the binding stands unless the kubelet
    # refuses the pod bound next to it.
    admitted_big = bound + [_entry(7, "MODIFIED", MakePod().name("p8").uid("p8").node("n1").container("c", cpu="2")
                                                  .allocated(cpu="2").obj())]
    assert [v.rev for v in check.check_entries(admitted_big, [rule()])] == [6]
    out_of_cpu = MakePod().name("p12").uid("p12").node("n1").container("c", cpu="250m").phase("Failed").obj()
    out_of_cpu.status.reason = "OutOfcpu"
    refused = admitted_big + [_entry(8, "MODIFIED", out_of_cpu)]
    assert check.check_entries(refused, [rule()]) == []
    # The resize came while the scheduler placed p8 (bound at 2 cpus next to p12, as it had it
    # at 500m), and p10 came next: the kubelet refused p8, so p10's binding over-committed nothing.
    p8_refused = MakePod().name("p8").uid("p8").node("n1").container("c", cpu="2").phase("Failed").obj()
    p8_refused.status.reason = "OutOfcpu"
    racing = bound + [_entry(7, "ADDED", MakePod().name("p10").uid("p10").container("c", cpu="500m").obj()),
                      _entry(8, "MODIFIED", MakePod().name("p10").uid("p10").node("n1").container("c", cpu="500m")
                                            .obj())]
    assert [v.rev for v in check.check_entries(racing, [rule()])] == [6, 8]
    assert check.check_entries(racing + [_entry(9, "MODIFIED", p8_refused)], [rule()]) == []


def test_pod_table_columns():
    p = MakePod().name("web").uid("u1").node("node-1").obj()
    p.metadata.creation_timestamp = "2020-01-01T00:00:00Z"
    p.status.phase = "Running"
    p.spec.containers.add(name="c")
    p.status.container_statuses.add(name="c", ready=True)
    from machinery.kinds import POD
    assert printers.table_header(POD, True, False) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE",
                                                       "NOMINATED NODE", "READINESS GATES"]
    row = printers.table_row(POD, p, True, False)
    assert row[0] == "web" and row[2] == "Running" and row[6] == "node-1"
    p.metadata.deletion_timestamp = "2020-01-01T00:00:01Z"
    assert printers.pod_status(p) == "Terminating"


def test_a_runtime_socket_too_deep_for_a_unix_socket_moves_to_a_short_stable_path():
    from cli.topology import runtime_socket
    short = "/tmp/d/nodes/node-1/runtime.sock"
    assert runtime_socket(short) == short
    deep = "/tmp/" + "x" * 120 + "/nodes/node-1/runtime.sock"
    moved = runtime_socket(deep)
    assert len(moved.encode()) < 108 and moved == runtime_socket(deep) != runtime_socket(deep.replace("1", "2"))


def test_a_component_argument_names_a_process_or_every_process_of_a_role():
    from cli.cluster import ClusterError, ClusterState, Process, select
    procs = [Process("etcd-1", "etcd", []), Process("etcd-2", "etcd", []), Process("scheduler", "scheduler", []),
             Process("kubelet/node-1", "kubelet", []), Process("kubelet/node-2", "kubelet", [])]
    state = ClusterState("/tmp", {}, {p.name: p for p in procs})
    assert [p.name for p in select(state, "kubelet/node-2")] == ["kubelet/node-2"]
    assert [p.name for p in select(state, "kubelet")] == ["kubelet/node-1", "kubelet/node-2"]
    assert [p.name for p in select(state, "etcd")] == ["etcd-1", "etcd-2"]
    assert [p.name for p in select(state, "scheduler")] == ["scheduler"]
    with pytest.raises(ClusterError, match='unknown component "runtime"'):
        select(state, "runtime")
