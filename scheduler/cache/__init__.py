"""The scheduler's cache: nodes and the pods on them (assumed ones included), and per-cycle snapshots."""
