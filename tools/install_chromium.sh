#!/bin/sh
# Install a headless browser for the test that renders `kplane timeline`'s page
# (tests/integration/test_timeline.py): Debian's chromium via apt when we can. Best effort: without
# it that test fails, saying chromium is missing.
set -u
if command -v chromium >/dev/null 2>&1; then exit 0; fi
sh "$(dirname "$0")/apt_install.sh" chromium
