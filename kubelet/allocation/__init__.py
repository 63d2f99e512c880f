"""Allocation: the one owner of the kubelet's allocated and actuated checkpoints (KEP-1287).

``checkpoint`` persists them, ``conditions`` keeps the resize conditions, ``manager`` admits pods
and resizes. Everyone else asks the manager; only this package writes checkpoint files.
"""
