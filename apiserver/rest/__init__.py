"""The Kubernetes REST API, served by the apiserver process beside its gRPC API.

Kubernetes' URL layout, JSON, discovery, Table responses, watches, patch types and metav1.Status
errors over the same request path (``apiserver/requests.py``), registry, admission, validation and
watch cache as the gRPC API: one implementation of every verb, two encodings, so kubectl and the
official clients work unchanged. One job per module:

- ``server.py``: the aiohttp application and listener (HTTPS, or plain HTTP on loopback), routing,
  authentication (bearer tokens, impersonation by system:masters);
- ``paths.py``: Kubernetes' URL layout <-> kind, namespace, name and subresource;
- ``verbs.py``: get, list, create, update, patch, delete, deletecollection and the subresources;
- ``watch.py``: ``?watch=1`` streams from the watch cache;
- ``codec.py``: JSON in and out, content negotiation, metav1.Status errors;
- ``discovery.py``: /version, /api, /apis and the aggregated discovery documents;
- ``tables.py``: meta.k8s.io/v1 Table responses with ``kplane get``'s columns;
- ``access.py``: SelfSubjectAccessReview, SubjectAccessReview and SelfSubjectReview (``kubectl auth``);
- ``openapi.py`` (another module's job): the OpenAPI documents, mounted by ``server.py`` when present.
"""
