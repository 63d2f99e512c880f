#!/bin/sh
# apt_install.sh PACKAGE: install one Debian package with apt where apt exists (as root, or with
# sudo -n), updating the package lists once if the first try fails. Best effort: says so and
# exits 0 when it could not; the caller checks for what it needed.
set -u
PACKAGE=$1
command -v apt-get >/dev/null 2>&1 || exit 0
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else SUDO="false"; fi
fi
echo "installing Debian's $PACKAGE with apt" >&2
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$PACKAGE" >/dev/null 2>&1 || {
  $SUDO apt-get update -q >/dev/null 2>&1 &&
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$PACKAGE" >/dev/null 2>&1
} || echo "apt could not install $PACKAGE" >&2
exit 0
