"""Field ownership and server-side apply, as Kubernetes' field manager (k8s.io/apimachinery's
managedfields over sigs.k8s.io/structured-merge-diff), written for kplane:

- ``schema``: the types apply merges by, read from the OpenAPI documents the REST API serves;
- ``fieldpath``: path elements, field sets, FieldsV1 and the printed paths of conflicts;
- ``typed``: a value's field set, the comparison of two values, merge, removal of items;
- ``manager``: metadata.managedFields on every write (Update) and apply (Apply), with conflicts.
"""

from apiserver.fieldmanager.manager import FieldManager, Manager, manager_from_user_agent, validate_manager

__all__ = ["FieldManager", "Manager", "manager_from_user_agent", "validate_manager"]
