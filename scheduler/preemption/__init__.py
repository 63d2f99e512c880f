"""Preemption: the evaluator shared by preemption plugins.

Sources: the Kubernetes preemption design ("Pod Preemption in Kubernetes") and Kubernetes docs: Pod
Priority and Preemption.
"""
