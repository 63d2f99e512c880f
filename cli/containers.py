"""A compose cluster's components are containers: found by the labels Compose puts on them
(``com.docker.compose.project`` and ``.service``, the same for Debian's docker-compose 1.29,
Compose v2 and ``docker stack``'s tasks aside), killed, started and looked at through the docker
command. ``kplane kill|start|restart`` and ``kplane status`` use these for a cluster whose
cluster.json names a compose project (``Process.container`` = ``project/service``)."""

from __future__ import annotations

import shutil
import subprocess


class ContainerError(Exception):
    """The docker command failed or is missing: one line for the user."""


def _docker(*args: str, timeout: float = 60) -> str:
    docker = shutil.which("docker")
    if docker is None:
        raise ContainerError("this is a compose cluster and there is no docker command here")
    try:
        out = subprocess.run([docker, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ContainerError(f"docker {args[0]} did not answer within {timeout:g}s") from None
    if out.returncode != 0:
        raise ContainerError(f"docker {args[0]}: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout


def container_ids(container: str) -> list[str]:
    """The containers of ``project/service`` (all of them, running or not)."""
    project, _, service = container.partition("/")
    return _docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={project}",
                   "--filter", f"label=com.docker.compose.service={service}").split()


def running(container: str) -> bool:
    ids = container_ids(container)
    if not ids:
        return False
    return "true" in _docker("inspect", "--format", "{{.State.Running}}", *ids).split()


def kill(container: str) -> bool:
    """SIGKILL every running container of the service; whether one was running."""
    ids = [i for i in container_ids(container)
           if _docker("inspect", "--format", "{{.State.Running}}", i).strip() == "true"]
    if ids:
        _docker("kill", "--signal", "KILL", *ids)
    return bool(ids)


def start(container: str) -> None:
    ids = container_ids(container)
    if not ids:
        raise ContainerError(f"no container of service {container.partition('/')[2]} in compose project "
                             f"{container.partition('/')[0]} (is the cluster up?)")
    _docker("start", *ids)
