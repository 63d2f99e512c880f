"""Well-known label and taint keys and node condition types (k8s.io/api core/v1
well_known_labels.go, well_known_taints.go, NodeConditionType), and kplane's own pod annotations
that the fake runtime reads: one spelling for every component."""

from __future__ import annotations

from typing import Final

# Labels.
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_OS: Final = "kubernetes.io/os"
LABEL_ARCH: Final = "kubernetes.io/arch"
LABEL_TOPOLOGY_ZONE: Final = "topology.kubernetes.io/zone"
LABEL_TOPOLOGY_REGION: Final = "topology.kubernetes.io/region"
LABEL_POD_TEMPLATE_HASH: Final = "pod-template-hash"  # apps/v1 DefaultDeploymentUniqueLabelKey

# Taints the node lifecycle controller and the kubelet put on nodes.
TAINT_NODE_NOT_READY: Final = "node.kubernetes.io/not-ready"
TAINT_NODE_UNREACHABLE: Final = "node.kubernetes.io/unreachable"
TAINT_NODE_UNSCHEDULABLE: Final = "node.kubernetes.io/unschedulable"
TAINT_NODE_MEMORY_PRESSURE: Final = "node.kubernetes.io/memory-pressure"
TAINT_NODE_DISK_PRESSURE: Final = "node.kubernetes.io/disk-pressure"
TAINT_NODE_PID_PRESSURE: Final = "node.kubernetes.io/pid-pressure"
TAINT_NODE_NETWORK_UNAVAILABLE: Final = "node.kubernetes.io/network-unavailable"

# Node condition types.
NODE_READY: Final = "Ready"
NODE_MEMORY_PRESSURE: Final = "MemoryPressure"
NODE_DISK_PRESSURE: Final = "DiskPressure"
NODE_PID_PRESSURE: Final = "PIDPressure"
NODE_NETWORK_UNAVAILABLE: Final = "NetworkUnavailable"

# kplane's pod annotations for the fake runtime's usage model (kubelet/runtime/fake.py): a
# container's memory and cpu usage (quantities) and how long it takes to stop on SIGTERM (seconds).
MEMORY_USAGE_ANNOTATION: Final = "kplane.dev/memory-usage"
CPU_USAGE_ANNOTATION: Final = "kplane.dev/cpu-usage"
SHUTDOWN_SECONDS_ANNOTATION: Final = "kplane.dev/shutdown-seconds"
