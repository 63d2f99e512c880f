"""NodePorts: host port conflicts with kube-scheduler's HostPortInfo semantics (0.0.0.0 overlaps
every IP, protocol defaults to TCP), sidecars, the per-node cache, and the QueueingHints."""

from __future__ import annotations

from machinery.api import core_pb2
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.types import NODE, POD, ActionType, ClusterEvent, Code, CycleState, QueueingHint
from scheduler.plugins import node_ports as np_
from tests.harness.builders import MakeNode, MakePod


def with_ports(name: str, *ports: tuple, node_name: str = "", sidecar: tuple | None = None,
               init: tuple | None = None) -> core_pb2.Pod:
    """Ports as (hostPort,) or (hostPort, protocol) or (hostPort, protocol, hostIP)."""
    p = MakePod().name(name).node(node_name).obj()
    p.metadata.uid = f"uid-{name}"
    for spec in ports:
        host_port, protocol, host_ip = (list(spec) + ["", ""])[:3]
        p.spec.containers[0].ports.add(container_port=80, host_port=host_port, protocol=protocol, host_ip=host_ip)
    for extra, policy in ((sidecar, "Always"), (init, "")):
        if extra is not None:
            c = p.spec.init_containers.add(name=f"init-{policy or 'plain'}", image="busybox")
            if policy:
                c.restart_policy = policy
            c.ports.add(container_port=9000, host_port=extra[0])
    return p


def node_with(*pods: core_pb2.Pod) -> NodeInfo:
    ni = NodeInfo(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").obj())
    for p in pods:
        ni.add_pod(p)
    return ni


def conflicts(st) -> bool:
    """The filter's verdict is a port conflict (not a Skip, an Error or a fit)."""
    return st != "skip" and st is not None and st.code == Code.UNSCHEDULABLE


def run_filter(pl, pod: core_pb2.Pod, ni: NodeInfo):
    state = CycleState()
    _, st = pl.pre_filter(state, pod, [ni])
    if st is not None and st.code == Code.SKIP:
        return "skip"
    return pl.filter(state, pod, ni)


def test_the_same_tcp_port_conflicts_and_preemption_may_help():
    pl = np_.new({}, None)
    st = run_filter(pl, with_ports("p", (8080,)), node_with(with_ports("a", (8080,), node_name="n1")))
    assert st.code == Code.UNSCHEDULABLE
    assert st.reasons == ["node(s) didn't have free ports for the requested pod ports"]


def test_another_port_or_protocol_fits():
    pl = np_.new({}, None)
    ni = node_with(with_ports("a", (8080, "TCP"), node_name="n1"))
    assert run_filter(pl, with_ports("p", (8081,)), ni) is None
    assert run_filter(pl, with_ports("u", (8080, "UDP")), ni) is None


def test_empty_protocol_means_tcp():
    pl = np_.new({}, None)
    ni = node_with(with_ports("a", (8080, "TCP"), node_name="n1"))
    assert conflicts(run_filter(pl, with_ports("p", (8080, "")), ni))


def test_two_specific_ips_do_not_conflict_but_bind_all_overlaps_every_ip():
    pl = np_.new({}, None)
    ni = node_with(with_ports("a", (8080, "TCP", "127.0.0.1"), node_name="n1"))
    assert run_filter(pl, with_ports("p", (8080, "TCP", "10.0.0.1")), ni) is None
    assert conflicts(run_filter(pl, with_ports("q", (8080, "TCP", "127.0.0.1")), ni))
    assert conflicts(run_filter(pl, with_ports("r", (8080, "TCP", "0.0.0.0")), ni))
    assert conflicts(run_filter(pl, with_ports("s", (8080, "TCP", "")), ni))  # empty hostIP = 0.0.0.0
    bind_all = node_with(with_ports("b", (8080, "TCP", ""), node_name="n1"))
    assert conflicts(run_filter(pl, with_ports("t", (8080, "TCP", "10.0.0.1")), bind_all))


def test_sidecars_hold_ports_but_plain_init_containers_do_not():
    pl = np_.new({}, None)
    sidecar_node = node_with(with_ports("a", node_name="n1", sidecar=(9000,)))
    init_node = node_with(with_ports("b", node_name="n1", init=(9000,)))
    assert conflicts(run_filter(pl, with_ports("p", (9000,)), sidecar_node))
    assert run_filter(pl, with_ports("p", (9000,)), init_node) is None
    assert np_.host_ports(with_ports("c", sidecar=(9000,))) == (("0.0.0.0", "TCP", 9000),)


def test_prefilter_skips_a_pod_without_host_ports():
    pl = np_.new({}, None)
    assert run_filter(pl, MakePod().name("plain").obj(), node_with()) == "skip"
    container_port_only = MakePod().name("cp").obj()
    container_port_only.spec.containers[0].ports.add(container_port=80)
    assert run_filter(pl, container_port_only, node_with()) == "skip"


def test_the_used_ports_follow_the_nodes_pods():
    pl = np_.new({}, None)
    ni = node_with(with_ports("a", (80,), node_name="n1"))
    p = with_ports("p", (8080,))
    assert run_filter(pl, p, ni) is None
    ni.add_pod(with_ports("b", (8080,), node_name="n1"))  # a new generation: the cache is rebuilt
    assert conflicts(run_filter(pl, p, ni))
    ni.remove_pod(with_ports("b", (8080,), node_name="n1"))
    assert run_filter(pl, p, ni) is None


def test_registers_pod_delete_with_a_hint_and_node_add_without():
    events = np_.new({}, None).events_to_register()
    assert [e.event for e in events] == [ClusterEvent(POD, ActionType.DELETE), ClusterEvent(NODE, ActionType.ADD)]
    assert events[0].hint is not None and events[1].hint is None  # a new node: always retried


def test_hint_queues_when_a_bound_or_nominated_pod_with_a_conflicting_port_is_deleted():
    pl = np_.new({}, None)
    p = with_ports("p", (8080,))
    assert pl.is_schedulable_after_pod_deleted(p, with_ports("a", (8080,), node_name="n1"), None) == QueueingHint.QUEUE
    nominated = with_ports("b", (8080,))
    nominated.status.nominated_node_name = "n1"
    assert pl.is_schedulable_after_pod_deleted(p, nominated, None) == QueueingHint.QUEUE


def test_hint_skips_deletions_that_free_nothing_the_pod_wants():
    pl = np_.new({}, None)
    p = with_ports("p", (8080,))
    skip = QueueingHint.QUEUE_SKIP
    assert pl.is_schedulable_after_pod_deleted(p, with_ports("a", (9090,), node_name="n1"), None) == skip
    assert pl.is_schedulable_after_pod_deleted(p, with_ports("b", (8080, "UDP"), node_name="n1"), None) == skip
    assert pl.is_schedulable_after_pod_deleted(p, with_ports("c", (8080,)), None) == skip  # never on a node
    assert pl.is_schedulable_after_pod_deleted(p, MakePod().name("d").node("n1").obj(), None) == skip  # no host ports
