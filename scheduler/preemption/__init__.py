"""Preemption (001 "Pod Preemption in Kubernetes", 004 §11): the evaluator shared by preemption plugins."""
