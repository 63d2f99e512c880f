"""Admission: the checks and mutations between authentication and the write.

``interfaces`` is the contract (Attributes, the mutating and validating interfaces, the chain),
``chain`` builds the apiserver's chain, one module per plugin holds the rest. Every write path —
create, update, patch, apply, delete and each subresource — runs the same chain (docs/apiserver.md,
"Admission").
"""
