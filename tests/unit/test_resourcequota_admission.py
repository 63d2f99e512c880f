"""ResourceQuota admission (apiserver.admission.resourcequota): Kubernetes' CheckRequest with its
messages, a resize charged its increase over what the pod already counts (KEP-1287 "Resource
Quota"), quotas the controller has not yet observed, dry runs, and the charge written with the
quota's resourceVersion as precondition — retried on a conflict, one request at a time per
namespace, so two creates can never both spend the last of a quota.

KEP-1287's "Resource Quota tests" with the values of Kubernetes' e2e: a quota ``resize-resource-quota``
of cpu 800m and memory 800Mi, two pods of 300m / 300Mi (Guaranteed), the first resized."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from apiserver import strategy
from apiserver.admission.resourcequota import ResourceQuotaAdmission, check_request
from machinery import errors, quota, timeutil
from machinery.api import core_pb2
from machinery.kinds import POD, REPLICA_SET, RESOURCE_QUOTA
from tests.harness.builders import MakePod, MakeReplicaSet, make_resource_quota

NOW = timeutil.now()


def observed(q: core_pb2.ResourceQuota, **used: str) -> core_pb2.ResourceQuota:
    """The quota as the controller writes it: status.hard = spec.hard, status.used as given."""
    q.status.hard.update(q.spec.hard)
    q.status.used.update({k.replace("_", "."): v for k, v in used.items()})
    q.metadata.resource_version = "1"
    return q


def running(name: str, cpu: str, memory: str, *, allocated: tuple[str, str] | None = None) -> core_pb2.Pod:
    """A Guaranteed pod reported running at ``allocated`` (its spec by default)."""
    a_cpu, a_mem = allocated or (cpu, memory)
    pod = MakePod().name(name).req(cpu=cpu, memory=memory).lim(cpu=cpu, memory=memory) \
        .allocated(cpu=a_cpu, memory=a_mem).actual(cpu=a_cpu, memory=a_mem).actual_lim(cpu=a_cpu, memory=a_mem).obj()
    pod.metadata.resource_version = "7"
    return pod


def refusal(quotas, obj, old=None, evaluator=quota.POD_EVALUATOR) -> str:
    with pytest.raises(errors.Forbidden) as exc:
        check_request(quotas, evaluator, obj, old, NOW)
    return exc.value.message


def e2e_quota() -> core_pb2.ResourceQuota:
    return observed(make_resource_quota("resize-resource-quota", {"cpu": "800m", "memory": "800Mi"}),
                    cpu="600m", memory="600Mi")


# ---------------------------------------------------------------- creates


def test_create_within_quota_charges_it():
    q = observed(make_resource_quota("q", {"requests.cpu": "2", "pods": "10"}), requests_cpu="1", pods="2")
    [charged] = check_request([q], quota.POD_EVALUATOR, MakePod().name("p").req(cpu="500m").obj(), None, NOW)
    assert dict(charged.status.used) == {"requests.cpu": "1500m", "pods": "3"}
    assert dict(q.status.used) == {"requests.cpu": "1", "pods": "2"}, "the quota read is not changed"


def test_brief_example_exceeded_quota():
    q = observed(make_resource_quota("compute", {"requests.cpu": "2"}), requests_cpu="1500m")
    assert check_request([q], quota.POD_EVALUATOR, MakePod().name("x").req(cpu="500m").obj(), None, NOW), \
        "2 of 2 fits"
    assert refusal([q], MakePod().name("x").req(cpu="501m").obj()) == (
        'pods "x" is forbidden: exceeded quota: compute, requested: requests.cpu=501m, used: requests.cpu=1500m, '
        'limited: requests.cpu=2')


def test_only_the_exceeded_resources_are_named_sorted():
    q = observed(make_resource_quota("q", {"requests.memory": "1Gi", "requests.cpu": "1", "pods": "5"}),
                 requests_cpu="0", requests_memory="512Mi", pods="1")
    pod = MakePod().name("x").req(cpu="2", memory="1Gi").obj()
    assert refusal([q], pod) == ('pods "x" is forbidden: exceeded quota: q, requested: requests.cpu=2,'
                                 'requests.memory=1Gi, used: requests.cpu=0,requests.memory=512Mi, limited: '
                                 'requests.cpu=1,requests.memory=1Gi')


def test_quota_never_observed_refuses_nothing():
    q = make_resource_quota("q", {"requests.cpu": "1"})  # status empty: the controller has not run
    assert check_request([q], quota.POD_EVALUATOR, MakePod().name("x").req(cpu="5").obj(), None, NOW) == []


def test_status_unknown_for_a_tracked_resource():
    q = observed(make_resource_quota("q", {"requests.cpu": "1", "pods": "2"}), pods="0")
    assert refusal([q], MakePod().name("x").req(cpu="1").obj()) == \
        'pods "x" is forbidden: status unknown for quota: q, resources: pods,requests.cpu'


def test_must_specify_the_tracked_requests():
    q = observed(make_resource_quota("q", {"requests.cpu": "1", "limits.memory": "1Gi"}), requests_cpu="0",
                 limits_memory="0")
    assert refusal([q], MakePod().name("x").req(cpu="100m").obj()) == \
        'pods "x" is forbidden: failed quota: q: must specify limits.memory for: c1'


def test_object_count_of_another_kind():
    q = observed(make_resource_quota("q", {"count/replicasets.apps": "1", "pods": "5"}), pods="0")
    q.status.used["count/replicasets.apps"] = "1"
    rs = MakeReplicaSet().name("web").obj()
    assert refusal([q], rs, evaluator=quota.evaluator_for(REPLICA_SET)) == (
        'replicasets.apps "web" is forbidden: exceeded quota: q, requested: count/replicasets.apps=1, used: '
        'count/replicasets.apps=1, limited: count/replicasets.apps=1')


def test_scoped_quota_skips_pods_out_of_scope():
    q = observed(make_resource_quota("q", {"pods": "0"}, scopes=("BestEffort",)), pods="0")
    assert check_request([q], quota.POD_EVALUATOR, MakePod().name("x").req(cpu="1").obj(), None, NOW) == []
    assert "exceeded quota: q" in refusal([q], MakePod().name("x").obj())


# ---------------------------------------------------------------- resizes (KEP-1287 "Resource Quota")


@pytest.mark.parametrize("case,cpu,memory,message", [
    (1, "600m", "400Mi", "exceeded quota: resize-resource-quota, requested: cpu=300m, used: cpu=600m, "
                         "limited: cpu=800m"),
    (2, "250m", "750Mi", "exceeded quota: resize-resource-quota, requested: memory=450Mi, used: memory=600Mi, "
                         "limited: memory=800Mi"),
    (3, "600m", "750Mi", "exceeded quota: resize-resource-quota, requested: cpu=300m,memory=450Mi, used: "
                         "cpu=600m,memory=600Mi, limited: cpu=800m,memory=800Mi"),
    (4, "350m", "300Mi", None),
    (5, "350m", "350Mi", None),
    (6, "400m", "400Mi", None),
])
def test_kep1287_resource_quota_cases(case, cpu, memory, message):
    old = running("testpod1", "300m", "300Mi")
    new = strategy.copy(old)
    res = new.spec.containers[0].resources
    for m in (res.requests, res.limits):
        m.update(cpu=cpu, memory=memory)
    q = e2e_quota()
    if message is not None:
        assert refusal([q], new, old) == f'pods "testpod1" is forbidden: {message}', f"Resource Quota test {case}"
        return
    [charged] = check_request([q], quota.POD_EVALUATOR, new, old, NOW)
    grown = {"cpu": quota.parse_list({"c": cpu})["c"] - quota.parse_list({"c": "300m"})["c"],
             "memory": quota.parse_list({"m": memory})["m"] - quota.parse_list({"m": "300Mi"})["m"]}
    assert quota.parse_list(charged.status.used) == quota.add(quota.parse_list(q.status.used), grown)


def test_resize_charges_the_increase_over_what_the_pod_counts():
    # Allocated 500m already counts (a resize down not actuated yet): a resize to 600m is charged 100m.
    old = running("p", "300m", "300Mi", allocated=("500m", "300Mi"))
    new = strategy.copy(old)
    new.spec.containers[0].resources.requests["cpu"] = new.spec.containers[0].resources.limits["cpu"] = "600m"
    q = observed(make_resource_quota("q", {"requests.cpu": "1"}), requests_cpu="900m")
    [charged] = check_request([q], quota.POD_EVALUATOR, new, old, NOW)
    assert charged.status.used["requests.cpu"] == "1"


def test_resize_down_charges_nothing():
    old = running("p", "300m", "300Mi")
    new = strategy.copy(old)
    new.spec.containers[0].resources.requests["cpu"] = new.spec.containers[0].resources.limits["cpu"] = "100m"
    q = observed(make_resource_quota("q", {"requests.cpu": "300m"}), requests_cpu="300m")
    assert check_request([q], quota.POD_EVALUATOR, new, old, NOW) == []


# ---------------------------------------------------------------- charging


class FakeRegistry:
    """The registry as the admission uses it: the watch cache's quotas and compare-and-swap writes."""

    def __init__(self, *quotas: core_pb2.ResourceQuota):
        self.stored = {q.metadata.name: strategy.copy(q) for q in quotas}
        self.cache = {RESOURCE_QUOTA: SimpleNamespace(store={})}
        self.writes = 0
        self.before_write = None  # a hook: another writer gets in first
        self._publish()

    def _publish(self):
        self.cache[RESOURCE_QUOTA].store = {RESOURCE_QUOTA.key(q.metadata.namespace, n): strategy.copy(q)
                                            for n, q in self.stored.items()}

    async def caught_up(self, kind):
        self._publish()

    async def read(self, kind, namespace, name, fresh=False):
        q = self.stored.get(name)
        return strategy.copy(q) if q is not None else None

    async def guaranteed_update(self, kind, namespace, name, build, *, precondition_rv=""):
        await asyncio.sleep(0)  # let the other requests run, as an etcd round trip would
        if self.before_write is not None:
            hook, self.before_write = self.before_write, None
            hook(self.stored[name])
        stored = self.stored[name]
        if stored.metadata.resource_version != precondition_rv:
            raise errors.conflict("resourcequotas", name)
        new = build(strategy.copy(stored))
        new.metadata.resource_version = str(int(stored.metadata.resource_version) + 1)
        self.stored[name] = new
        self.writes += 1
        return new


async def test_two_creates_cannot_both_spend_the_last_of_a_quota():
    registry = FakeRegistry(observed(make_resource_quota("q", {"pods": "3"}), pods="2"))
    admission = ResourceQuotaAdmission(registry)
    results = await asyncio.gather(*(admission.charge(POD, MakePod().name(f"p{i}").obj()) for i in range(4)),
                                   return_exceptions=True)
    assert sum(r is None for r in results) == 1
    assert all(isinstance(r, errors.Forbidden) and "exceeded quota: q, requested: pods=1, used: pods=3" in r.message
               for r in results if r is not None)
    assert registry.stored["q"].status.used["pods"] == "3"


async def test_a_conflicting_write_is_read_again_and_checked_again():
    registry = FakeRegistry(observed(make_resource_quota("q", {"requests.cpu": "1"}), requests_cpu="500m"))

    def controller_recounts(stored: core_pb2.ResourceQuota) -> None:  # the controller saw another pod
        stored.status.used["requests.cpu"] = "800m"
        stored.metadata.resource_version = "2"

    registry.before_write = controller_recounts
    with pytest.raises(errors.Forbidden) as exc:
        await ResourceQuotaAdmission(registry).charge(POD, MakePod().name("p").req(cpu="300m").obj())
    assert "requested: requests.cpu=300m, used: requests.cpu=800m, limited: requests.cpu=1" in exc.value.message
    assert registry.writes == 0


async def test_dry_run_checks_and_charges_nothing():
    registry = FakeRegistry(observed(make_resource_quota("q", {"pods": "1"}), pods="0"))
    admission = ResourceQuotaAdmission(registry)
    await admission.charge(POD, MakePod().name("p").obj(), dry_run=True)
    assert registry.writes == 0
    registry.stored["q"].status.used["pods"] = "1"
    with pytest.raises(errors.Forbidden):
        await admission.charge(POD, MakePod().name("p").obj(), dry_run=True)


async def test_a_namespace_without_quotas_is_not_checked():
    registry = FakeRegistry()
    await ResourceQuotaAdmission(registry).charge(POD, MakePod().name("p").req(cpu="100").obj())
    assert registry.writes == 0
