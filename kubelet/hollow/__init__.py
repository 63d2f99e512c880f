"""Hollow nodes: many kubelets in one process, each with its own in-process runtime, checkpoint
dir, Node, Lease and identity — the kubelet's own code path, for scale runs (as kubemark's hollow
nodes). ``python -m kubelet.hollow --nodes 500 ...``; ``kplane up --hollow-nodes 500``."""
