"""The scheduler process (``python -m scheduler``), modelled on kube-scheduler.

``queue/`` (activeQ, backoffQ, unschedulable pool, QueueingHints), ``framework/`` (extension
points, CycleState, PodInfo/NodeInfo, the runtime), ``plugins/`` (one module per plugin),
``cache/`` (nodes and pods, assumed pods, snapshots), ``preemption/`` (the evaluator),
``schedule_one.py`` (a scheduling and binding cycle), ``scheduler.py`` (informers and the loop),
``config.py`` (KubeSchedulerConfiguration), ``main.py`` (flags, leader election).
"""
