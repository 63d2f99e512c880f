#!/bin/sh
# Install a real Compose implementation for the test that validates compose.yaml: Debian's
# docker-compose via apt when we can. Best effort: without one that test says it could not run.
set -u
if command -v docker-compose >/dev/null 2>&1; then exit 0; fi
if docker compose version >/dev/null 2>&1; then exit 0; fi
sh "$(dirname "$0")/apt_install.sh" docker-compose
