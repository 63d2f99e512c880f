"""The controller-manager (``python -m controllers``): kube-controller-manager's controllers.

Each controller is one module, shaped as client-go's controllers are: shared informers fill the
caches, event handlers only enqueue keys on the controller's workqueue (named after it, so its
``workqueue_*`` metrics carry that name), and workers reconcile one key at a time from the cache —
level-triggered, so a missed or repeated event cannot corrupt what they decide. Only the leader
of the ``kube-system/kube-controller-manager`` Lease runs them (``controllers.main``).
"""
