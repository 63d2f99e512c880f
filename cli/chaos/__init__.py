"""Chaos as a product: schedules of timed operations and faults, run against a cluster and checked
(``kplane run``), generated from a seed (``kplane chaos``), shrunk to a minimal failing one
(``kplane chaos shrink``). docs/chaos.md tells the whole story.

Where each part lives: ``schedule.py`` (the file format: steps, their validation, YAML in and out),
``marks.py`` (the Events that put a run's faults into the cluster's own history), ``steps.py``
(what each step does to a cluster), ``converge.py`` (when a cluster has settled), ``runner.py``
(one schedule run end to end), ``generate.py`` (seeded schedules by profile), ``shrink.py``.
"""
