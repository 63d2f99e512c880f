"""Kubernetes releases as kplane's components know them: the one they are built as, and the ones
``--emulated-version`` lets each of them behave as (KEP-4330 compatibility versions).

Every kplane component is one "binary" at ``BINARY`` (the release whose behaviour is kplane's
newest). ``--emulated-version`` makes it behave as an older release: its feature gates default
as that release had them (machinery/featuregates.py), and what the release did not serve is
refused. Kubernetes lets a binary emulate three minors back; kplane stands in for the older
binaries of a skewed cluster too, so its floor is lower: ``FLOOR``, the oldest release a kubelet
may run beside the oldest apiserver of the skew matrix (docs/version-skew.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class VersionError(ValueError):
    """A version that does not parse, or that is outside the releases kplane emulates."""


@dataclass(frozen=True, order=True)
class Version:
    """A release, major.minor (Kubernetes' version.MajorMinor)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> "Version":
        """``1.36``, ``v1.36`` or ``v1.36.2`` (the patch, and a build suffix as in ``v1.36.2+k3s``, is
        dropped, as --emulated-version drops it)."""
        m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?", text.strip())
        if m is None:
            raise VersionError(f"could not parse {text!r} as version: want MAJOR.MINOR, e.g. 1.36")
        return cls(int(m.group(1)), int(m.group(2)))

    def subtract_minor(self, n: int) -> "Version":
        return Version(self.major, self.minor - n)

    @property
    def git_version(self) -> str:
        """As /version's gitVersion and a node's kubeletVersion show it: ``v1.36.0``."""
        return f"v{self.major}.{self.minor}.0"

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


BINARY = Version(1, 37)
FLOOR = Version(1, 32)


def emulated(text: str) -> Version:
    """The ``--emulated-version`` value as a Version within [FLOOR, BINARY], or VersionError with
    Kubernetes' message ("emulation version 1.30 is not between [1.32, 1.37]")."""
    v = Version.parse(text)
    if v < FLOOR or v > BINARY:
        raise VersionError(f"emulation version {v} is not between [{FLOOR}, {BINARY}]")
    return v


# Kubernetes' version skew policy: how many minors older than the apiserver each component may be
# (none may be newer). kubeadm refuses a kubelet newer than the control plane in its preflight.
MAX_MINORS_OLDER = {"kubelet": 3, "kube-scheduler": 1, "kube-controller-manager": 1}


def skew_violation(component: str, version: Version, apiserver: Version) -> str | None:
    """Why ``component`` at ``version`` beside an apiserver at ``apiserver`` is outside the version
    skew policy, or None. ``component``: kubelet, kube-scheduler, kube-controller-manager."""
    allowed = MAX_MINORS_OLDER[component]
    if version > apiserver:
        return (f"the {component} version {version} is newer than the apiserver's {apiserver}: the version skew "
                f"policy never allows a {component} newer than the apiserver")
    if apiserver.major != version.major or apiserver.minor - version.minor > allowed:
        return (f"the {component} version {version} is more than {allowed} minor "
                f"version{'s' if allowed > 1 else ''} older than the apiserver's {apiserver}: outside the version "
                f"skew policy")
    return None


def apiserver_skew_violation(apiservers: list[Version]) -> str | None:
    """The policy for several apiservers: the newest and the oldest within one minor version."""
    newest, oldest = max(apiservers), min(apiservers)
    if newest.major != oldest.major or newest.minor - oldest.minor > 1:
        return (f"the apiserver versions {oldest} and {newest} are more than 1 minor version apart: the version "
                f"skew policy keeps the newest and the oldest apiserver within one")
    return None
