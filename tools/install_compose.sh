#!/bin/sh
# Install a real Compose implementation for the test that validates compose.yaml: Debian's
# docker-compose via apt when we can. Best effort: without one that test says it could not run.
set -u
if command -v docker-compose >/dev/null 2>&1; then exit 0; fi
if docker compose version >/dev/null 2>&1; then exit 0; fi
if command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else SUDO="false"; fi
  fi
  echo "installing Debian's docker-compose with apt" >&2
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker-compose >/dev/null 2>&1 || {
    $SUDO apt-get update -q >/dev/null 2>&1 &&
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker-compose >/dev/null 2>&1
  } || echo "apt could not install docker-compose" >&2
fi
exit 0
