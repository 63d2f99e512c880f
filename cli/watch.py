"""``kplane get -w``: after the first listing, print every change until interrupted.

The list-and-watch loop is the informers' (``machinery.informer.Reflector``): when the stream
breaks (the apiserver restarts: UNAVAILABLE "Stream removed", a reset connection) the watch is
opened again, with backoff, from the last resourceVersion seen, so nothing is missed and nothing
printed twice; stdout carries only objects, a short note goes to stderr. When the server no
longer has that version (``Gone``, "too old resource version") the kind is listed again and
what changed since the last line printed is printed: objects new or modified as themselves,
objects gone as DELETED (the difference an informer's handlers get after a relist).
"""

from __future__ import annotations

import sys
from typing import Callable, TextIO

from google.protobuf.message import Message

from machinery import errors
from machinery.client import ResourceClient
from machinery.informer import Reflector, key_of
from machinery.kinds import object_meta

ShowFn = Callable[[str, Message], None]

# Errors no retry can cure: end the watch with them (one line, exit 1).
_FATAL = (errors.Unauthorized, errors.Forbidden, errors.BadRequest, errors.Invalid, errors.MethodNotAllowed,
          errors.RequestEntityTooLarge)


class _Printed:
    """What has been printed, by key: so a relist prints only the difference."""

    def __init__(self, shown: list[Message], show: ShowFn):
        self._objects = {key_of(o): o for o in shown}
        self._show = show

    def event(self, type_: str, obj: Message) -> None:
        key = key_of(obj)
        if type_ == "DELETED":
            self._objects.pop(key, None)
        else:
            old = self._objects.get(key)
            if old is not None and _rv(old) >= _rv(obj):
                return  # printed already
            self._objects[key] = obj
        self._show(type_, obj)

    def relisted(self, items: list[Message], resource_version: str) -> None:
        fresh = {key_of(o): o for o in items}
        for key in [k for k in self._objects if k not in fresh]:
            self._show("DELETED", self._objects.pop(key))
        for key, obj in fresh.items():
            old = self._objects.get(key)
            if old is None or object_meta(old).resource_version != object_meta(obj).resource_version:
                self._objects[key] = obj
                self._show("ADDED" if old is None else "MODIFIED", obj)


async def follow(resource: ResourceClient, *, namespace: str, label_selector: str, field_selector: str,
                 resource_version: str, shown: list[Message], show: ShowFn, err: TextIO | None = None) -> None:
    """Print (through ``show``) every change after ``resource_version``, at which ``shown`` were
    listed and printed; returns only by an exception (a fatal error, Ctrl-C)."""
    printed = _Printed(shown, show)
    out = err if err is not None else sys.stderr

    def failed(exc: errors.ApiError, failures: int) -> None:
        if isinstance(exc, _FATAL):
            raise exc
        if isinstance(exc, errors.Gone):
            print(f"watch: resourceVersion {reflector.resource_version} is too old ({exc.message}); listing again",
                  file=out, flush=True)
        elif failures == 1:
            print(f"watch interrupted ({exc.message}); resuming from resourceVersion {reflector.resource_version}",
                  file=out, flush=True)

    reflector = Reflector(resource, on_list=printed.relisted, on_event=printed.event, on_error=failed,
                          namespace=namespace, label_selector=label_selector, field_selector=field_selector)
    await reflector.run(resource_version)


def _rv(obj: Message) -> int:
    try:
        return int(object_meta(obj).resource_version)
    except ValueError:
        return 0
