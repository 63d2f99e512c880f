"""The ``kplane`` command: run a cluster as local processes and drive it like kubectl."""
