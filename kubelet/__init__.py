"""The kubelet and its CRI-like runtime (python -m kubelet): arrive with the Kubelet issue."""
