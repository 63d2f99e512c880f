"""A step of a pod's story, and the names of the components that take steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# Where a step was read.
HISTORY: Final = "history"  # a version of the pod or of its ResourceClaim
EVENT: Final = "event"  # a core/v1 Event
SCHEDULER_LOG: Final = "scheduler-log"  # a scheduler's log record, placed by wall clock

SCHEDULER: Final = "scheduler"
CONTROLLER_MANAGER: Final = "controller-manager"

# Field managers and event reporters, as the components they are (kubelets add their node).
_MANAGERS: Final = {"kube-scheduler": SCHEDULER, "default-scheduler": SCHEDULER,
                    "kube-controller-manager": CONTROLLER_MANAGER}


@dataclass(frozen=True)
class Step:
    """One thing that happened to the pod: at revision ``rev`` (for a log record: the last
    revision whose wall time is not after the record's), by ``component``."""

    rev: int
    component: str
    what: str
    source: str = HISTORY
    time: str = ""  # the wall time the entry or record carries (RFC 3339); "" when it carries none

    def as_dict(self) -> dict[str, object]:
        return {"rev": self.rev, "component": self.component, "what": self.what, "source": self.source,
                "time": self.time}


def component_of(manager: str, node: str = "") -> str:
    """The component a field manager or an event's reporter is: ``kubelet/node-1``, ``scheduler``,
    ``controller-manager``, or the name itself (a user's client: ``kplane``, ``kubectl``)."""
    if manager == "kubelet":
        return f"kubelet/{node}" if node else "kubelet"
    if manager.endswith("-controller") or manager.startswith("kube-controller-manager"):
        return CONTROLLER_MANAGER
    return _MANAGERS.get(manager, manager)
