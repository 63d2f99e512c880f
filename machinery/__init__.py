"""Code shared by every kplane process.

The generated API (``machinery.api``), Kubernetes quantities, pod resource math, selectors,
the async client with informers and workqueues, feature gates, failpoints, logging and the
admin HTTP server. Nothing here talks to etcd: only the apiserver does.
"""
