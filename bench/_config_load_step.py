"""One step of `bench/config_load.py`, in a fresh interpreter:
`python -m bench._config_load_step STEP PATH` prints one JSON line (`s`, `mb`, `count`)."""

from __future__ import annotations

import json
import resource
import sys
import time

import yaml

from monitor.config import load_config, load_yaml


def main(step: str, path: str) -> None:
    with open(path, encoding="utf-8") as file:
        text = file.read()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
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
