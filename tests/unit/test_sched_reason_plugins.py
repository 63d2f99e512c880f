"""``Diagnosis.reason_plugins``: the plugin behind each reason of kube-scheduler's FitError
message ("0/3 nodes are available: 2 Insufficient cpu, 1 node(s) had untolerated taint ..."),
which the scheduler logs with ``pod_unschedulable`` so ``kplane explain`` can name it."""

from scheduler.framework.types import Code, Diagnosis, FitError, Status
from tests.harness.builders import MakePod


def test_each_reason_of_the_message_names_its_plugin():
    fit = Status(Code.UNSCHEDULABLE, "Insufficient cpu", plugin="NodeResourcesFit")
    taint = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) had untolerated taint {a: b}",
                   plugin="TaintToleration")
    d = Diagnosis(node_to_status={"n1": fit, "n2": Status(Code.UNSCHEDULABLE, "Insufficient cpu",
                                                          "Insufficient memory", plugin="NodeResourcesFit"),
                                  "n3": taint})
    assert str(FitError(MakePod().obj(), 3, d)) == ("0/3 nodes are available: 1 Insufficient memory, 1 node(s) had "
                                                    "untolerated taint {a: b}, 2 Insufficient cpu.")
    assert d.reason_plugins() == {"Insufficient cpu": "NodeResourcesFit", "Insufficient memory": "NodeResourcesFit",
                                  "node(s) had untolerated taint {a: b}": "TaintToleration"}


def test_nodes_a_prefilter_ruled_out_count_with_their_status():
    affinity = "node(s) didn't match Pod's node affinity/selector"
    d = Diagnosis(absent_nodes_status=Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, affinity, plugin="NodeAffinity"))
    assert d.reason_plugins() == {affinity: "NodeAffinity"}
