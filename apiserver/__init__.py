"""kplane's API server: the only process that talks to etcd.

``python -m apiserver --etcd-endpoints 127.0.0.1:2379 --listen 127.0.0.1:6443 --token-auth-file tokens.csv``

Layers, outside in: gRPC handlers (``handlers``: authentication, metrics, error mapping) ->
``registry`` (Kubernetes verbs with optimistic concurrency; ``pods`` adds graceful delete,
binding, resize and eviction) -> ``admission`` (node restriction, priority) -> ``defaults`` and
``validation`` -> ``etcd`` (storage), with ``watchcache`` serving lists and watches and
``history`` serving the revision-ordered event log.
"""
