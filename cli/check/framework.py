"""What a rule sees and reports: an entry of the revision-ordered history, the world as of that
entry, a violation, and the rule type every check implements."""

from __future__ import annotations

from dataclasses import dataclass, field

from google.protobuf.message import Message

from machinery.api import core_pb2


@dataclass
class Violation:
    rule: str
    rev: int
    message: str


@dataclass
class Entry:
    rev: int
    type: str
    kind: str
    namespace: str
    name: str
    obj: Message

    @property
    def pod(self) -> core_pb2.Pod | None:
        """The object, when this is a pod's entry."""
        return self.obj if isinstance(self.obj, core_pb2.Pod) else None

    @property
    def node(self) -> core_pb2.Node | None:
        """The object, when this is a node's entry."""
        return self.obj if isinstance(self.obj, core_pb2.Node) else None

    @property
    def event(self) -> core_pb2.Event | None:
        """The object, when this is an event's entry."""
        return self.obj if isinstance(self.obj, core_pb2.Event) else None


class Rule:
    name = ""
    # The components whose decisions the rule judges (roles, as ``kplane failpoint`` takes them): a
    # lag in their view makes the rule's races likelier, and the shrinker adds one to steady a flaky one.
    deciders: tuple[str, ...] = ()

    def observe(self, e: Entry, world: "World") -> list[Violation]:
        """The violations entry ``e`` shows; ``world`` is the state with ``e`` applied."""
        raise NotImplementedError

    def finish(self, world: "World") -> list[Violation]:
        """The violations only the whole history shows, once every entry was observed (each at the
        revision it concerns). ``world`` is the state after the last entry."""
        return []


@dataclass
class World:
    """The latest state of every object, as of the entry being checked."""

    objects: dict[tuple[str, str, str], Message] = field(default_factory=dict)

    def apply(self, e: Entry) -> Message | None:
        key = (e.kind, e.namespace, e.name)
        prev = self.objects.get(key)
        if e.type == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = e.obj
        return prev

    def pod(self, namespace: str, name: str) -> core_pb2.Pod | None:
        obj = self.objects.get(("Pod", namespace, name))
        return obj if isinstance(obj, core_pb2.Pod) else None

    def node(self, name: str) -> core_pb2.Node | None:
        obj = self.objects.get(("Node", "", name))
        return obj if isinstance(obj, core_pb2.Node) else None
