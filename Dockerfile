# kplane:dev where a registry is reachable: `docker build -t kplane:dev .`. Without one, `make image`
# (tools/image.py) builds the same layout from Debian's packages and PyPI: Debian's python3 and
# etcd-server, kplane and its dependencies in a venv at /opt/kplane/venv, first on PATH.
FROM debian:bookworm-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 python3-venv etcd-server ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml README.md /tmp/kplane/
COPY machinery /tmp/kplane/machinery
COPY apiserver /tmp/kplane/apiserver
COPY scheduler /tmp/kplane/scheduler
COPY controllers /tmp/kplane/controllers
COPY kubelet /tmp/kplane/kubelet
COPY cli /tmp/kplane/cli
COPY bench /tmp/kplane/bench
RUN python3 -m venv /opt/kplane/venv \
    && /opt/kplane/venv/bin/pip install --quiet --no-cache-dir /tmp/kplane \
    && rm -rf /tmp/kplane
ENV PATH=/opt/kplane/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1
WORKDIR /opt/kplane
VOLUME /var/lib/kplane
