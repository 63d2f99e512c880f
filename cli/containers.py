"""A compose cluster's components are containers: found by the labels Compose puts on them
(``com.docker.compose.project`` and ``.service``, the same for Debian's docker-compose 1.29 and
Compose v2) or, deployed with ``docker stack deploy``, the swarm's
(``com.docker.swarm.service.name`` = ``<stack>_<service>``); killed, started and looked at
through the docker command. ``kplane kill|start|restart`` and ``kplane status`` use these for a
cluster whose cluster.json names a compose project (``Process.container`` = ``project/service``).
A swarm starts a killed task's replacement itself: ``start`` has nothing to do there."""

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


def _compose_ids(container: str) -> list[str]:
    project, _, service = container.partition("/")
    return _docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={project}",
                   "--filter", f"label=com.docker.compose.service={service}").split()


def _swarm_service(container: str) -> str:
    project, _, service = container.partition("/")
    return f"{project}_{service}"


def _is_swarm_service(container: str) -> bool:
    try:
        return bool(_docker("service", "ls", "-q", "--filter", f"name={_swarm_service(container)}").split())
    except ContainerError:  # not a swarm manager: no services
        return False


def container_ids(container: str) -> list[str]:
    """The containers of ``project/service``: compose's (running or not), else the swarm's tasks."""
    return _compose_ids(container) or _docker(
        "ps", "-aq", "--filter", f"label=com.docker.swarm.service.name={_swarm_service(container)}").split()


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
    ids = _compose_ids(container)
    if ids:
        _docker("start", *ids)
        return
    if _is_swarm_service(container):
        return  # a swarm service: the swarm starts its killed task's replacement itself
    project, _, service = container.partition("/")
    raise ContainerError(f"no container of service {service} in compose project {project} (is the cluster up?)")
