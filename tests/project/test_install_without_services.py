"""`install_without_services` (tests/install_without_services.sh, which `tests/run.sh`
sources to install Prometheus and Alertmanager): the machine's services are left as it
found them. While apt-get runs, the policy-rc.d it installs forbids every start; afterwards
the policy file that was there is back, byte for byte (or none is, where none was), also
when apt-get fails or the run is interrupted; and every unit and init script of every
package the install added, its dependencies' too, is disabled again, never one of a
package that was there before.

apt-get, dpkg, dpkg-query, update-rc.d and deb-systemd-helper are stubs on PATH that log
what they are asked, and the policy file is a temporary one (`POLICY_RC_D`): nothing of
the machine is touched."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

# What each stub package holds (`dpkg -L`): prometheus a unit and an init script, its
# dependency a timer under /usr/lib, the package already installed a unit of its own.
FILES = {
    "prometheus": [
        "/lib/systemd/system/prometheus.service",
        "/etc/init.d/prometheus",
        "/usr/share/doc/prometheus/README",
    ],
    "dep-with-timer": ["/usr/lib/systemd/system/dep-cleanup.timer"],
    "already-here": ["/lib/systemd/system/already-here.service"],
}

STUBS = {
    # Asks the policy, as invoke-rc.d does for each service the postinst starts, then
    # installs the package and a dependency; `interrupt`: the run is stopped meanwhile (SIGTERM,
    # as a CI timeout stops it).
    "apt-get": """
echo "apt-get $*" >> "$LOG"
case "$1" in update) exit 0 ;; esac
"$POLICY_RC_D" prometheus start; echo "policy said $?" >> "$LOG"
[ "$MODE" = fail ] && exit 100
echo prometheus >> "$DB"; echo dep-with-timer >> "$DB"
[ "$MODE" = interrupt ] && kill -TERM "$PPID"
exit 0
""",
    "dpkg-query": 'while read -r p; do echo "installed $p"; done < "$DB"; echo "config-files gone"',
    "dpkg": """
shift  # -L
for p in "$@"; do cat "$FILES/$p"; done
""",
    "update-rc.d": 'echo "update-rc.d $*" >> "$LOG"',
    "deb-systemd-helper": 'echo "deb-systemd-helper $*" >> "$LOG"',
}

POLICY_BEFORE = "#!/bin/sh\n# the machine's own policy\nexit 0\n"


def _install(tmp_path: Path, mode: str, policy_before: str | None) -> tuple[int, list[str], Path]:
    """Runs `install_without_services prometheus` on the stubs: its exit status, the log
    of what the stubs were asked, and the policy file's path."""
    bin_dir, files = tmp_path / "bin", tmp_path / "files"
    bin_dir.mkdir()
    files.mkdir()
    for name, body in STUBS.items():
        stub = bin_dir / name
        stub.write_text(f"#!/bin/bash\n{body}\n")
        stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    for package, listed in FILES.items():
        (files / package).write_text("".join(f"{f}\n" for f in listed))
    db, log, policy = tmp_path / "db", tmp_path / "log", tmp_path / "policy-rc.d"
    db.write_text("already-here\n")
    log.write_text("")
    if policy_before is not None:
        policy.write_text(policy_before)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "POLICY_RC_D": str(policy),
        "LOG": str(log),
        "DB": str(db),
        "FILES": str(files),
        "MODE": mode,
    }
    script = f". {REPO / 'tests/install_without_services.sh'}; install_without_services prometheus"
    run = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    return run.returncode, log.read_text().splitlines(), policy


@pytest.mark.parametrize("policy_before", [POLICY_BEFORE, None], ids=["a policy", "none"])
def test_no_service_starts_and_what_the_install_enabled_is_disabled(
    tmp_path: Path, policy_before: str | None
) -> None:
    code, log, policy = _install(tmp_path, "ok", policy_before)
    assert code == 0, log
    assert "policy said 101" in log  # every start forbidden while apt-get ran
    assert (policy.read_text() if policy.exists() else None) == policy_before
    disabled = {line for line in log if line.startswith(("update-rc.d", "deb-systemd-helper"))}
    assert disabled == {
        "update-rc.d prometheus disable",
        "deb-systemd-helper disable prometheus.service",
        "deb-systemd-helper disable dep-cleanup.timer",  # a dependency's unit too
    }


@pytest.mark.parametrize("mode", ["fail", "interrupt"])
def test_a_failed_or_interrupted_install_puts_the_policy_back(tmp_path: Path, mode: str) -> None:
    code, log, policy = _install(tmp_path, mode, POLICY_BEFORE)
    assert code != 0, log
    assert "policy said 101" in log
    assert policy.read_text() == POLICY_BEFORE
