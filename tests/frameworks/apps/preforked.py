"""A framework app's runs forked from one process that imported the app's modules once
(`harness.framework_envs.Preforked` starts it from the app's own environment):
`python -m tests.frameworks.apps.preforked APP [MODULE ...]` imports what `APP`'s module
imports at its top (its framework, the OTel SDK; never the module itself) and each
`MODULE`, then reads one request a line on stdin, `{"argv": [...], "stdout": PATH,
"stderr": PATH}`, and answers `{"pid": PID}` when it forked a run and `{"pid": PID,
"code": STATUS}` when that run ended.

Each run is a process of its own, as `python -m tests.frameworks.apps.APP ARGV...` is: the
child runs the module as `__main__`, instruments and exits through the interpreter's own
shutdown (its threads joined, its exit handlers run), so an instrumentation's global
patches never outlive its run. What the child inherits is only modules imported and not
yet used: the app sets what its framework reads from the environment before it imports
what is not preloaded. A parent with a thread of its own would fork a child missing it;
it refuses instead."""

from __future__ import annotations

import ast
import gc
import importlib
import importlib.util
import json
import os
import runpy
import sys
import threading


def top_level_imports(module: str) -> list[str]:
    """The modules `module`'s source imports at its top level, in order (not those
    imported inside its functions, which may depend on what its `main` set first)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    with open(spec.origin, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    found: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module != "__future__":
                found.append(node.module)
    return found


def serve(app: str, preload: list[str]) -> list[str]:
    """Answer requests until stdin closes (then exit); in a forked child, return the
    run's argv."""
    module = f"tests.frameworks.apps.{app}"
    for name in [*top_level_imports(module), *preload]:
        importlib.import_module(name)
    gc.freeze()  # the children's collections leave the parent's pages shared
    for line in sys.stdin:
        request = json.loads(line)
        if threading.active_count() != 1:
            names = [t.name for t in threading.enumerate()]
            _answer({"error": f"a thread was started by the preloaded modules: {names}"})
            sys.exit(1)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
                target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(target, fd)
                os.close(target)
            os.close(null)
            return [module, *request["argv"]]
        _answer({"pid": pid})
        _, status = os.waitpid(pid, 0)
        _answer({"pid": pid, "code": os.waitstatus_to_exitcode(status)})
    sys.exit(0)


def _answer(line: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    run = serve(sys.argv[1], sys.argv[2:])
    sys.argv = run
    runpy.run_module(run[0], run_name="__main__", alter_sys=True)
