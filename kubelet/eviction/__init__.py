"""Node-pressure eviction: the kubelet fails pods to reclaim memory (Kubernetes' pkg/kubelet/eviction).

- ``thresholds``: the ``--eviction-*`` flags, parsed and validated; defaults;
- ``signals``: the runtime's container stats as node and pod memory; ``memory.available``;
- ``evaluate``: thresholds met, grace periods, minimum reclaim, node conditions with the
  transition period (pure functions and the state carried between rounds);
- ``pods``: a pod's priority, memory request, criticality;
- ``ranking``: the order pods are evicted in under memory pressure;
- ``message``: the texts an evicted or refused pod gets;
- ``admission``: refusing pods while the node is under pressure;
- ``manager``: the loop that ties them together and asks the kubelet to kill one pod at a time.

kplane simulates the ``memory.available`` signal only; docs/kubelet.md says what that covers.
"""
