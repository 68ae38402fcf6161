#!/usr/bin/env bash
# Builds the environments the real-framework apps run from, never the monitor's: one virtual
# environment per Python stack (or group of compatible stacks) from its lock,
# tests/frameworks/envs/<name>/requirements.lock, and the JavaScript apps' packages from
# tests/js/package-lock.json, the Go apps (tests/frameworks/<app>/go.mod) and the JVM apps
# (tests/frameworks/<app>/pom.xml). Each goes into a cache folder named by its lock's hash, so an
# unchanged lock is built once per machine and a changed one is built afresh; older builds
# of the same stack are removed. Links tests/js/node_modules to the JavaScript packages and
# prints the cache folder (tests/run.sh exports it as MONITOR_TESTS_FRAMEWORK_ENVS).
#
# Usage: build.sh [UV] [all|python]; UV is the uv to install with (default: uv on PATH);
# `python` leaves the JavaScript packages out (tests/run.sh, for a selection of tests that
# runs no JavaScript app). Refresh a lock
# with `uv pip compile tests/frameworks/envs/NAME/requirements.in --python-version 3.11
# --python-platform x86_64-manylinux_2_36 --no-header -o .../requirements.lock` and
# `npm install --prefix tests/js` (package-lock.json).
set -euo pipefail
cd "$(dirname "$0")/../../.."
uv="${1:-uv}"
which="${2:-all}"
cache="${MONITOR_TESTS_FRAMEWORK_ENVS:-${XDG_CACHE_HOME:-$HOME/.cache}/rag-monitor/framework-envs}"
mkdir -p "$cache"
# One build at a time per cache: two checkouts' test runs on one machine would otherwise
# remove and rebuild the same folder under each other. The second waits, then finds the
# folders complete.
exec 9>"${cache%/}.lock"
flock 9

fresh() {  # $1: the build's folder; succeeds when it is complete
    [ -e "$1/.complete" ]
}
prune() {  # $1: stack name, $2: the build to keep
    for old in "$cache/$1"-*; do
        if [ "$old" != "$2" ] && [ -e "$old" ]; then rm -rf "$old"; fi
    done
}

for lock in tests/frameworks/envs/*/requirements.lock; do
    name=$(basename "$(dirname "$lock")")
    dir="$cache/$name-$(sha256sum "$lock" | cut -c1-16)"
    if ! fresh "$dir"; then
        rm -rf "$dir"
        "$uv" venv -q --python "$(command -v python3)" "$dir" >&2
        "$uv" pip sync -q --python "$dir/bin/python" "$lock" >&2
        touch "$dir/.complete"
    fi
    # Byte-compiled once, here: where PYTHONDONTWRITEBYTECODE is set no app run writes a
    # .pyc, and each run would compile every module it imports from source again. A file
    # that does not compile (a template, another Python's syntax) is left as it is.
    if [ ! -e "$dir/.compiled" ]; then
        "$dir/bin/python" -m compileall -q "$dir/lib" >/dev/null 2>&1 || true
        touch "$dir/.compiled"
    fi
    prune "$name" "$dir"
done

# The Go apps: each folder of tests/frameworks/ with a go.mod, built from its go.mod and
# go.sum alone (GOFLAGS=-mod=readonly: a module they do not name fails the build, naming
# it), into a folder named by the hash of its sources; the modules come from the Go module
# proxy into Go's own module cache.
for mod in tests/frameworks/*/go.mod; do
    [ -e "$mod" ] || continue
    src=$(dirname "$mod")
    name=$(basename "$src")
    dir="$cache/$name-$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go | sha256sum | cut -c1-16)"
    if ! fresh "$dir"; then
        rm -rf "$dir"
        mkdir -p "$dir"
        (cd "$src" && GOFLAGS=-mod=readonly GOTOOLCHAIN=local go build -o "$dir/app" .) >&2
        touch "$dir/.complete"
    fi
    prune "$name" "$dir"
done

# The JVM apps: each folder of tests/frameworks/ with a pom.xml, built by Maven into a folder
# named by the hash of its pom.xml and sources (a copy is built there, so no target/ is
# left in the checkout). Offline first, from Maven's own local repository; when that lacks
# an artifact, again with Maven Central, which fails naming any artifact it cannot fetch.
for pom in tests/frameworks/*/pom.xml; do
    [ -e "$pom" ] || continue
    src=$(dirname "$pom")
    name=$(basename "$src")
    dir="$cache/$name-$(cd "$src" && { echo pom.xml; find src -type f | LC_ALL=C sort; } | xargs cat | sha256sum | cut -c1-16)"
    if ! fresh "$dir"; then
        rm -rf "$dir"
        mkdir -p "$dir/project"
        cp -r "$src/pom.xml" "$src/src" "$dir/project/"
        if ! (cd "$dir/project" && mvn -B -q -o package -DskipTests >"$dir/offline.log" 2>&1); then
            (cd "$dir/project" && mvn -B -q package -DskipTests) >&2
        fi
        # A Spring Boot app's one jar, or Quarkus's quarkus-app/ (its runner and libraries).
        if [ -d "$dir/project/target/quarkus-app" ]; then
            mv "$dir/project/target/quarkus-app" "$dir/quarkus-app"
        else
            mv "$dir/project/target/app.jar" "$dir/app.jar"
        fi
        rm -rf "$dir/project" "$dir/offline.log"
        touch "$dir/.complete"
    fi
    # A Spring Boot app is also extracted (its jar beside its libraries, as Boot's
    # `-Djarmode=tools extract` lays it out) with a class-data-sharing archive of every class
    # its context loads, recorded by a run that stops once the context is refreshed: each
    # test's JVM maps those classes instead of loading and verifying them again
    # (harness/framework_envs.jvm_app). The flags are harness/framework_envs.JVM_FLAGS. Where
    # no archive can be made the app runs from its jar as it is.
    if [ -e "$dir/app.jar" ] && [ ! -e "$dir/.cds" ]; then
        rm -rf "$dir/app"
        if java -Djarmode=tools -jar "$dir/app.jar" extract --destination "$dir/app" \
            >"$dir/cds.log" 2>&1 &&
            java -XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -XX:+UseSerialGC -Xmx256m \
                -XX:ArchiveClassesAtExit="$dir/app/app.jsa" -Dspring.context.exit=onRefresh \
                -jar "$dir/app/app.jar" --rag.kb=none >>"$dir/cds.log" 2>&1 &&
            [ -s "$dir/app/app.jsa" ]; then
            rm "$dir/cds.log"
            touch "$dir/.cds"
        else
            rm -rf "$dir/app"
            echo "build.sh: $name runs without a class-data archive ($dir/cds.log says why)" >&2
        fi
    fi
    prune "$name" "$dir"
done

if [ "$which" = python ]; then
    echo "$cache"
    exit 0
fi

lock=tests/js/package-lock.json
dir="$cache/js-$(sha256sum "$lock" | cut -c1-16)"
if ! fresh "$dir"; then
    rm -rf "$dir"
    mkdir -p "$dir"
    cp tests/js/package.json "$lock" "$dir/"
    npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >&2
    touch "$dir/.complete"
fi
prune js "$dir"
rm -rf tests/js/node_modules
ln -s "$dir/node_modules" tests/js/node_modules
echo "$cache"
