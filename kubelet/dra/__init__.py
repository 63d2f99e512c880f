"""The kubelet's side of Dynamic Resource Allocation: a fake DRA driver and the claims manager.

- ``driver``: kplane's fake driver ``dra.kplane.dev`` — the ResourceSlice of ``--dra-devices`` GPUs
  a node publishes (pool = the node's name, devices ``gpu-0`` … ``gpu-K-1``), the DeviceClass
  ``gpu.kplane.dev`` that selects them (``kplane up`` creates it, as a cluster administrator does
  when installing a driver), and the driver's prepare and unprepare of claims on the node;
- ``manager``: Kubernetes' pkg/kubelet/cm/dra manager — before a pod's containers start, every
  claim the pod names must be allocated to this node and reserved for the pod, then each is
  prepared by its driver (``status.resourceClaimStatuses`` names the generated claims); when the
  pod ends, its claims are unprepared.
"""
