# Sourced by tests/run.sh: `install_without_services PACKAGE...` installs Debian packages
# (as root) and leaves the machine's services as it found them.
#
# Debian starts and enables a package's services when it installs it; the tests start the
# binaries themselves, so the machine's services are left as they were: a policy-rc.d that
# forbids every start (invoke-rc.d and deb-systemd-invoke ask it) while apt-get runs, the
# one there before put back afterwards (also when the run is interrupted), and each unit and
# init script of every package the install added (the dependencies too) disabled again.
# POLICY_RC_D names another policy file (the tests of this function).

install_without_services() {
    local policy=${POLICY_RC_D:-/usr/sbin/policy-rc.d} saved="" status=0 file before added
    if [ -e "$policy" ]; then
        saved=$(mktemp)
        cp -p "$policy" "$saved"
    fi
    before=$(_installed)
    # Put back what was there, however apt-get ends: an interrupted run must not leave a
    # machine on which no service may start.
    _put_back_policy() {
        if [ -n "$saved" ]; then
            mv "$saved" "$policy"
        else
            rm -f "$policy"
        fi
    }
    trap '_put_back_policy; trap - EXIT; exit 130' INT TERM HUP
    trap '_put_back_policy' EXIT
    printf '#!/bin/sh\n# tests/run.sh installs packages: no service starts meanwhile.\nexit 101\n' \
        >"$policy"
    chmod 755 "$policy"
    apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" ||
        status=$?
    _put_back_policy
    trap - INT TERM HUP EXIT
    [ "$status" = 0 ] || return "$status"
    added=$(comm -13 <(printf '%s\n' "$before") <(_installed))
    [ -n "$added" ] || return 0
    # shellcheck disable=SC2086  # one package a word
    for file in $(dpkg -L $added | grep -E '^(/usr)?/lib/systemd/system/[^/]+\.(service|socket|timer)$|^/etc/init\.d/'); do
        case "$file" in
            /etc/init.d/*) update-rc.d "${file##*/}" disable >/dev/null 2>&1 || true ;;
            *) deb-systemd-helper disable "${file##*/}" >/dev/null 2>&1 || true ;;
        esac
    done
}

# The packages installed now (not those removed with their configuration kept), sorted.
_installed() {
    dpkg-query -W -f '${db:Status-Status} ${Package}\n' | awk '$1 == "installed" { print $2 }' | sort
}
