"""``kplane up --hollow-nodes N --hollow-processes P``: the N hollow nodes split over P processes by
contiguous ranges (cli/topology.py)."""

from __future__ import annotations

import pytest

from cli import topology
from cli.main import build_parser


def _shards(nodes: int, processes: int = 0) -> list[topology.HollowShard]:
    return topology.hollow_shards(topology.ClusterConfig(hollow_nodes=nodes, hollow_processes=processes))


def _covered(shards: list[topology.HollowShard]) -> list[int]:
    return [i for s in shards for i in range(s.first, s.first + s.nodes)]


@pytest.mark.parametrize(("nodes", "processes"), [(1, 1), (6, 2), (7, 3), (5000, 5), (5000, 7), (10, 10),
                                                  (3, 5), (1001, 0), (5000, 0)])
def test_the_ranges_cover_every_hollow_node_exactly_once(nodes, processes):
    shards = _shards(nodes, processes)
    assert _covered(shards) == list(range(1, nodes + 1))
    sizes = [s.nodes for s in shards]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
    assert len(shards) == min(processes or topology.auto_hollow_processes(nodes), nodes)


def test_the_first_process_keeps_its_name_the_others_are_numbered():
    shards = _shards(6, 2)
    assert shards == [topology.HollowShard("hollow-nodes", 1, 3), topology.HollowShard("hollow-nodes-2", 4, 3)]
    assert [s.name for s in _shards(7, 3)] == ["hollow-nodes", "hollow-nodes-2", "hollow-nodes-3"]
    assert _shards(0, 3) == []


def test_each_process_runs_its_range_with_an_admin_port_and_data_dir_of_its_own():
    cfg = topology.ClusterConfig(nodes=1, hollow_nodes=6, hollow_processes=2, apiservers=2, data_dir="/d")
    cfg.ports = {n: 30000 + i for i, n in enumerate(topology.port_names(cfg))}
    assert {"hollow-nodes.admin", "hollow-nodes-2.admin"} <= set(cfg.ports)
    comps = {c.name: c for c in topology.build(cfg, "local") if c.role == "hollow"}
    assert list(comps) == ["hollow-nodes", "hollow-nodes-2"]

    def flag(name: str, f: str) -> str:
        argv = comps[name].argv
        return argv[argv.index(f) + 1]

    assert [(flag(n, "--first"), flag(n, "--nodes")) for n in comps] == [("1", "3"), ("4", "3")]
    assert [flag(n, "--data-dir") for n in comps] == ["/d/hollow", "/d/hollow-nodes-2"]
    assert comps["hollow-nodes"].admin != comps["hollow-nodes-2"].admin
    # The processes take the apiservers in turn, the first on the first.
    apis = [c.grpc for c in topology.build(cfg, "local") if c.role == "apiserver"]
    assert [flag(n, "--server").split(",")[0] for n in comps] == apis
    assert topology.node_names(cfg)[1:] == [f"hollow-node-{i}" for i in range(1, 7)]


def test_auto_one_process_per_thousand_nodes_at_most_two_per_core():
    assert topology.auto_hollow_processes(0, cores=2) == 0
    assert topology.auto_hollow_processes(1, cores=2) == 1
    assert topology.auto_hollow_processes(1000, cores=2) == 1
    assert topology.auto_hollow_processes(1001, cores=2) == 2
    assert topology.auto_hollow_processes(5000, cores=2) == 4
    assert topology.auto_hollow_processes(5000, cores=8) == 5
    assert topology.auto_hollow_processes(50_000, cores=1) == 2


def test_which_component_is_a_hollow_process_and_which_process_runs_a_node():
    assert [n for n in ("hollow-nodes", "hollow-nodes-2", "hollow-nodes-12", "hollow-nodes-x", "hollow-node-1",
                        "kubelet/hollow-nodes-2", "apiserver") if topology.is_hollow(n)] == [
        "hollow-nodes", "hollow-nodes-2", "hollow-nodes-12"]
    cfg = topology.ClusterConfig(hollow_nodes=7, hollow_processes=3)
    assert [getattr(topology.hollow_shard_of(cfg, f"hollow-node-{i}"), "name", None) for i in (1, 3, 4, 6, 7, 8)] == [
        "hollow-nodes", "hollow-nodes", "hollow-nodes-2", "hollow-nodes-3", "hollow-nodes-3", None]
    assert topology.hollow_shard_of(cfg, "node-1") is None and topology.hollow_shard_of(cfg, "hollow-node-x") is None


def test_kplane_up_takes_hollow_processes():
    args = build_parser().parse_args(["up", "--hollow-nodes", "6", "--hollow-processes", "2"])
    assert (args.hollow_nodes, args.hollow_processes) == (6, 2)
    assert build_parser().parse_args(["up"]).hollow_processes == 0



async def test_hollow_kubelets_run_the_evented_pleg_unless_the_gates_say_otherwise(tmp_path):
    from kubelet.hollow.main import build, parse_args
    from kubelet.pleg import EVENTED_RELIST_PERIOD
    from machinery.client import Client

    (tmp_path / "hollow-node-1.token").write_text("t")
    base = ["--nodes", "1", "--token-dir", str(tmp_path), "--data-dir", str(tmp_path), "--server", "127.0.0.1:1"]
    assert parse_args(base).feature_gates == "EventedPLEG=true"
    assert parse_args([*base, "--feature-gates", "SidecarContainers=true"]).feature_gates == \
        "SidecarContainers=true,EventedPLEG=true"
    assert parse_args([*base, "--feature-gates", "EventedPLEG=false"]).feature_gates == "EventedPLEG=false"
    assert parse_args([*base, "--feature-gates", " EventedPLEG = False "]).feature_gates == " EventedPLEG = False "
    # A flag that does not parse is left as given: the kubelet's own check refuses it, in one line.
    assert parse_args([*base, "--feature-gates", "EventedPLEG"]).feature_gates == "EventedPLEG"
    shared = Client("127.0.0.1:1", "")
    [node] = build(parse_args(base), shared)
    assert node.kubelet.cfg.evented_pleg and node.kubelet.evented_pleg is not None
    assert node.kubelet.housekeeping._pleg_relist_period == EVENTED_RELIST_PERIOD
    [plain] = build(parse_args([*base, "--feature-gates", "EventedPLEG=false"]), shared)
    assert plain.kubelet.evented_pleg is None and plain.kubelet.housekeeping._pleg_relist_period == 1.0
