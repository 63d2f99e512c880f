"""Admission: the checks and mutations between authentication and the write.

Order (docs/apiserver.md, "Admission"): node restriction -> namespace lifecycle -> LimitRanger
(mutating) -> priority -> defaulting -> validation -> LimitRanger (validating) -> ResourceQuota.
Node restriction is also the authorizer: everything an authenticated user asks is allowed except
what it forbids kubelets to do.
"""
