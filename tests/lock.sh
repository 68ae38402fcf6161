#!/usr/bin/env bash
# Writes tests/requirements.lock: every distribution the test and training extras need, at one version each,
# for Python 3.11 on Linux x86-64. Run it after changing the dependencies in pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.9
if ! command -v uv >/dev/null || [ "$(uv --version | cut -d' ' -f2)" != "$UV_VERSION" ]; then
    echo "tests/lock.sh: needs uv $UV_VERSION (python3 -m pip install uv==$UV_VERSION)" >&2
    exit 1
fi
uv pip compile pyproject.toml --extra test --extra training --python-version 3.11 \
    --python-platform x86_64-manylinux_2_36 --no-header --quiet -o tests/requirements.lock "$@"
# uv writes a dependency on a folder of extras/ by its path alone; a constraint (as
# bench/install_size.py and the default-install test use the lock) must name it.
sed -E -i 's|^(extras/([a-z0-9-]+))$|rag-monitor-\2 @ ./\1|' tests/requirements.lock
