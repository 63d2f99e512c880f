"""Dynamic Resource Allocation shared by the scheduler, the controller-manager and the kubelet.

kplane's counterpart of Kubernetes' ``k8s.io/dynamic-resource-allocation`` library
(Kubernetes docs: Dynamic Resource Allocation):

- ``resourceclaim``: which ResourceClaim a pod's ``spec.resourceClaims`` entry names (its own, or
  the one generated from a template and recorded in ``status.resourceClaimStatuses``), whether a
  claim was generated for a pod, is reserved for it or can be, and the claim -> pods index key;
- ``selectors``: the device selectors kplane evaluates — exact-value attribute matching, the
  CEL-free subset of Kubernetes' CEL selectors;
- ``allocator``: the structured-parameters allocator — which free devices of a node's
  ResourceSlices satisfy a set of claims (the scheduler's DynamicResources plugin runs it).
"""
