# One image for every kplane service (compose.yaml): kplane itself and Debian's etcd-server.
FROM python:3.11-slim-bookworm
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends etcd-server \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/kplane
COPY pyproject.toml README.md ./
COPY machinery machinery
COPY apiserver apiserver
COPY scheduler scheduler
COPY controllers controllers
COPY kubelet kubelet
COPY cli cli
COPY bench bench
RUN pip install --no-cache-dir .
ENV PYTHONUNBUFFERED=1
VOLUME /var/lib/kplane
