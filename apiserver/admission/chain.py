"""The apiserver's admission chain, in the order Kubernetes runs these plugins.

NodeRestriction first: it is also the Node authorizer's rule for writes, and authorization comes
before admission. Then Kubernetes' order (kube-apiserver's AllOrderedPlugins): NamespaceLifecycle,
LimitRanger, Priority, ResourceQuota last. The mutating steps run in that order, then the kind's
strategy (defaults, validation), then the validating steps (LimitRanger's bounds, ResourceQuota's
charge): see apiserver/admission/interfaces.py and docs/apiserver.md, "Admission".
"""

from __future__ import annotations

from apiserver.admission.interfaces import AdmissionChain
from apiserver.admission.limitranger import LimitRanger
from apiserver.admission.namespacelifecycle import NamespaceLifecycle
from apiserver.admission.noderestriction import NodeRestriction
from apiserver.admission.priority import Priority
from apiserver.admission.resourcequota import ResourceQuotaAdmission
from apiserver.admission.storage import AdmissionStorage


def new_chain(storage: AdmissionStorage) -> AdmissionChain:
    """The chain every write of this apiserver passes, its plugins reading ``storage``."""
    return AdmissionChain([NodeRestriction(), NamespaceLifecycle(storage), LimitRanger(storage), Priority(storage),
                           ResourceQuotaAdmission(storage)])
