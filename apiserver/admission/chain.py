"""The apiserver's admission chain, in the order Kubernetes runs these plugins.

NodeRestriction first: it is also the Node authorizer's rule for writes, and authorization comes
before admission. Then Kubernetes' order (kube-apiserver's AllOrderedPlugins): NamespaceLifecycle,
LimitRanger, Priority, PodResizeValidator (Kubernetes 1.36 and later), ResourceQuota last. The
mutating steps run in that order, then the kind's strategy (defaults, validation), then the
validating steps (LimitRanger's bounds, PodResizeValidator's node checks, ResourceQuota's charge):
see apiserver/admission/interfaces.py and docs/apiserver.md, "Admission".
"""

from __future__ import annotations

from apiserver.admission import podresize
from apiserver.admission.interfaces import AdmissionChain, Plugin
from apiserver.admission.limitranger import LimitRanger
from apiserver.admission.namespacelifecycle import NamespaceLifecycle
from apiserver.admission.noderestriction import NodeRestriction
from apiserver.admission.podresize import PodResizeValidator
from apiserver.admission.priority import Priority
from apiserver.admission.resourcequota import ResourceQuotaAdmission
from apiserver.admission.storage import AdmissionStorage
from machinery.featuregates import FeatureGates


def new_chain(storage: AdmissionStorage, gates: FeatureGates | None = None) -> AdmissionChain:
    """The chain every write of this apiserver passes, its plugins reading ``storage``; the
    plugins of its emulated release (``gates``), with their gates."""
    gates = gates or FeatureGates()
    plugins: list[Plugin] = [NodeRestriction(), NamespaceLifecycle(storage), LimitRanger(storage), Priority(storage)]
    if gates.emulated_version >= podresize.SINCE:
        plugins.append(PodResizeValidator(storage, gates.enabled("InPlacePodVerticalScaling")))
    return AdmissionChain([*plugins, ResourceQuotaAdmission(storage)])
