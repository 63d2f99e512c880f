"""Admission: the checks and mutations between authentication and validation.

Order (docs/apiserver.md, "Admission"): node restriction -> namespace lifecycle -> priority ->
defaulting -> validation.
Node restriction is also the authorizer: everything an authenticated user asks is allowed except
what it forbids kubelets to do.
"""
