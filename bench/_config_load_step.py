"""One step of `bench/config_load.py`, in a fresh interpreter:
`python -m bench._config_load_step STEP PATH` prints one JSON line (`s`, `mb`, `count`).

`mb` is the peak RSS above the point where the step started; for `check-config`, which
runs `rag-monitor check-config PATH` as this process's only child, it is that child's
whole peak RSS."""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
import time

import yaml

from monitor.config import load_config, load_yaml


def main(step: str, path: str) -> None:
    with open(path, encoding="utf-8") as file:
        text = file.read()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if step == "check-config":
        done = subprocess.run(
            [sys.executable, "-m", "monitor", "check-config", path],
            capture_output=True,
            text=True,
            check=True,
        )
        elapsed = time.perf_counter() - start
        summary = re.search(r"^# sampling rate \S+ \((\d+) overrides\)$", done.stdout, re.M)
        count = int(summary.group(1)) if summary else -1
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(json.dumps({"s": elapsed, "mb": peak_mb, "count": count}))
        return
    if step == "CSafeLoader":
        count = len(yaml.load(text, Loader=yaml.CSafeLoader)["sampling"]["overrides"])
    elif step == "load_yaml":
        count = len(load_yaml(text)["sampling"]["overrides"])
    else:
        count = len(load_config(path, environ={}).sampling.overrides)
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"s": elapsed, "mb": (peak - before) / 1024, "count": count}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
