#!/usr/bin/env bash
# Install the database servers the tests run throwaway instances of (tests/servers.py:
# PostgreSQL, MariaDB, Redis on loopback; no Docker, no system service), from the Debian
# packages postgresql, mariadb-server and redis-server, when they are missing; and Debian's
# chromium, the browser the inspector's tests drive (tests/ui: Playwright never downloads one).
#
# Called by `make test`, `make test-all` and `make test-servers` (so by .ci/run too).
# Installs only as root with apt-get; otherwise, or when the install fails, it says
# what is missing and how to install it, and exits 0: the tests still run, the ones of
# a missing server skip, and the test run ends with a line naming them. Does nothing
# with AGENTSESSION_TEST_SERVERS=0 (the server stores left out of the tests).
set -uo pipefail

case "${AGENTSESSION_TEST_SERVERS:-}" in
0 | false | no) exit 0 ;;
esac

# Where tests/servers.py looks for each server (PATH and the sbin directories).
sbin_path="$PATH:/usr/sbin:/usr/local/sbin:/sbin"
found() { PATH="$sbin_path" command -v "$1" >/dev/null; }

missing=()
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || found initdb || missing+=(postgresql)
{ found mariadbd || found mysqld; } && { found mariadb-install-db || found mysql_install_db; } ||
    missing+=(mariadb-server)
found redis-server || missing+=(redis-server)
found chromium || missing+=(chromium)
[ ${#missing[@]} -eq 0 ] && exit 0

warn() {
    echo "warning: $1: ${missing[*]} missing, their tests will be SKIPPED;" \
        "install with: sudo make test-servers (or sudo apt-get install -y ${missing[*]})" >&2
}
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    warn "not root, or no apt-get"
    exit 0
fi

echo "installing test servers: ${missing[*]}"
# Keep the packages' maintainer scripts from starting the system services: the tests
# start their own instances.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && trap 'rm -f "$policy"' EXIT
fi
if ! { apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null; }; then
    warn "the install failed"
fi
exit 0
