"""The errors the garbage collector's workers raise to look at an item again later, which the
controller expects: a kind kplane does not serve (Kubernetes' garbagecollector errors.go), a
virtual node not observed yet, dependents that could not be orphaned."""

from __future__ import annotations


class RestMappingError(Exception):
    """An ownerReference names an apiVersion/kind kplane does not serve (retried: it may be a typo
    or a kind not yet served, as Kubernetes' restMappingError)."""


class NotObservedYet(Exception):
    """A virtual node the API has but no informer delivered yet: looked at again later (Kubernetes
    requeues it so that a node added and removed while a watch was down cannot stay for ever)."""


class OrphaningFailed(Exception):
    """Some dependents of an orphaning owner could not be patched: the owner is looked at again."""
