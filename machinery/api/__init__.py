"""The generated kplane API (from protos/kplane/v1; regenerate with ``make proto``).

Modules: ``meta_pb2`` (ObjectMeta, requests), ``core_pb2`` (Pod, Node, Event), ``scheduling_pb2``
(PriorityClass), ``policy_pb2`` (PodDisruptionBudget), ``coordination_pb2`` (Lease),
``resource_pb2`` (DRA), ``api_pb2`` / ``api_pb2_grpc`` (the services), ``cri_pb2`` / ``cri_pb2_grpc``
(the kubelet's CRI-like runtime API, package kplane.cri.v1).
"""
