"""`load_config`: file, `${env:...}`, overrides, validation; every problem reported as
`path.to.key: what is wrong`, with the environment variable behind it when there is one."""

from __future__ import annotations

import copy
import difflib
import os
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, Tag, ValidationError

from monitor.config._env import ENV_PREFIX, apply_override, env_overrides, expand_env_refs
from monitor.config._evaluators import DEFAULT_LOCAL_EVALUATORS, EvaluatorConfig
from monitor.config._fields import ConfigError, QuotedScalar, Refused
from monitor.config._receivers import OTLP_PROTOCOLS
from monitor.config._root import Config, reference_problems
from monitor.config._yaml import read_yaml_file

_SECTIONS = frozenset(Config.model_fields)
_NAMED_PROBLEM = re.compile(r"^([a-z0-9_][a-z0-9_.]*): (.+)$", re.S)


# What a check of the evaluators' own (names, scales, judge prompts) says of the entries:
# `N.key: problem` lines, N the entry's index (`monitor.evaluators.registry`).
EvaluatorCheck = Callable[[list[EvaluatorConfig], str | None], list[str]]
# What a component says of a valid config (a judge's credentials, the metrics port's web
# config), given the environment: `path.to.key: problem` lines.
ConfigCheck = Callable[[Config, Mapping[str, str]], list[str]]

# pydantic's wording for a value of the wrong type, in the words of a config file.
_TYPE_WORDS = {
    "model_type": "expected a mapping of keys (key: value)",
    "model_attributes_type": "expected a mapping of keys (key: value)",
    "dict_type": "expected a mapping (key: value)",
    "list_type": "expected a list",
    "tuple_type": "expected a list",
    "string_type": "expected text",
    "int_type": "expected a whole number",
    "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "finite_number": "expected a finite number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "missing": "required value is missing",
}


def validation_problems(exc: ValidationError, model: type[BaseModel] | None = None) -> list[str]:
    """A validation error as `path.to.key: what is wrong` lines, in the words of the file
    (no internal class names); an unknown key of `model`'s tree names the nearest known one."""
    problems = []
    for err in exc.errors():
        path = _keys_of(model, err["loc"]) if model is not None else err["loc"]
        loc = ".".join(str(p) for p in path)
        refused = err.get("input")
        if isinstance(refused, Refused) and refused.key is not None:
            loc = f"{loc}.{refused.key}" if loc else refused.key
        for msg in _message(err, model).split("\n"):
            where = loc
            # Validators that see several keys name their own key first ("key: problem");
            # pydantic's own messages, and a refused value's reason, are not so named.
            named = _NAMED_PROBLEM.match(msg) if err["type"] == "value_error" else None
            if named:
                where = f"{loc}.{named.group(1)}" if loc else named.group(1)
                msg = named.group(2)
            problems.append(f"{where or '(top level)'}: {msg}")
    return problems


def _keys_of(model: type[BaseModel], loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """`loc` as the file's keys: without the label pydantic puts after a key whose value
    may take several forms (a union: the tag of the form tried, or a name such as
    `literal[...]`), which the file never wrote."""
    keys: list[int | str] = []
    current: Any = model
    for part in loc:
        current = _unannotated(current)
        if get_origin(current) in (Union, type(int | None)):
            forms = [a for a in get_args(current) if a is not type(None)]
            if len(forms) > 1:
                current = next((f for f in forms if _is_form(f, part)), None)
                continue
            current = _unannotated(forms[0]) if forms else None
        keys.append(part)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            current = field.annotation if field is not None else None
        elif get_origin(current) in (list, tuple, dict):
            current = get_args(current)[-1] if get_args(current) else None
        else:
            current = None
    return tuple(keys)


def _unannotated(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _is_form(form: Any, label: int | str) -> bool:
    """Whether `label` (in an error's location) names `form`, one type of a union."""
    tags = get_args(form)[1:] if get_origin(form) is Annotated else ()
    if any(isinstance(t, Tag) and t.tag == label for t in tags):
        return True
    base = _unannotated(form)
    return isinstance(base, type) and base.__name__ in str(label)


def _message(err: Mapping[str, Any], model: type[BaseModel] | None) -> str:
    kind = err["type"]
    if isinstance(err.get("input"), QuotedScalar):
        text = err["input"].text
        return f"{text!r} is written as a string; write it without quotes"
    if isinstance(err.get("input"), Refused):
        return str(err["input"].why)
    if kind == "extra_forbidden":
        return "unknown key" + _nearest_key(model, err["loc"])
    if kind in _TYPE_WORDS:
        return _TYPE_WORDS[kind]
    msg = str(err["msg"]).removeprefix("Value error, ")
    return msg.replace("Input should be", "must be")


def _nearest_key(model: type[BaseModel] | None, loc: tuple[int | str, ...]) -> str:
    """`; did you mean 'x'?` for an unknown key at `loc` close to a known one (a key of any
    form the entry may take: an alert rule's of any kind)."""
    if model is None:
        return ""
    sections = _models_at(model, _keys_of(model, loc)[:-1])
    known = list(dict.fromkeys(key for section in sections for key in section.model_fields))
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The section model a config path leads to (through lists, mappings and `| None`;
    the first, where an entry takes several)."""
    models = _models_at(model, loc)
    return models[0] if models else None


def _models_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[type[BaseModel]]:
    """The section models a config path may lead to: one, or each form of an entry that
    takes several (an alert rule's kinds)."""
    current = [model]
    for part in loc:
        if isinstance(part, int):  # an index into a list already unwrapped to its items
            continue
        fields = [f for m in current if (f := m.model_fields.get(str(part))) is not None]
        current = [m for f in fields for m in _models_in(f.annotation)]
    return current


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation holds, through `Annotated`, unions, lists and mappings."""
    annotation = _unannotated(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_origin(annotation) in (Union, type(int | None), list, dict, tuple):
        return [m for arg in get_args(annotation) for m in _models_in(arg)]
    return []


def _otlp_section(data: dict[str, Any]) -> dict[str, Any]:
    receivers = data.get("receivers")
    otlp = receivers.get("otlp") if isinstance(receivers, dict) else None
    return otlp if isinstance(otlp, dict) else {}


def _literal_token(data: dict[str, Any]) -> bool:
    """The file holds the OTLP token itself rather than a reference to the environment."""
    token = _otlp_section(data).get("auth_token")
    return isinstance(token, str) and "${env:" not in token


def _literal_headers(data: dict[str, Any]) -> list[str]:
    """A problem for each webhook header whose value the file holds itself rather than
    a reference to the environment (`${env:VAR}`): every header is kept as a secret (masked
    in `check-config`), and a token written into the file is in every copy of it. The
    header is taken out, so the rest validates."""
    alerts = data.get("alerts")
    hooks = alerts.get("webhooks") if isinstance(alerts, dict) else None
    problems = []
    for i, hook in enumerate(hooks if isinstance(hooks, list) else []):
        headers = hook.get("headers") if isinstance(hook, dict) else None
        if not isinstance(headers, dict):
            continue
        for name, value in list(headers.items()):
            if isinstance(value, str) and "${env:" not in value:
                problems.append(
                    f"alerts.webhooks.{i}.headers.{name}: a header value is not written into "
                    "the config file (headers are kept as secrets); put it in an environment "
                    f"variable and write {name}: ${{env:<VARIABLE>}} (for a token: "
                    f"{name}: 'Bearer ${{env:<VARIABLE>}}')"
                )
                del headers[name]  # validated without it, for the rest
    return problems


def load_config(
    path: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    evaluator_check: EvaluatorCheck | None = None,
    *,
    on_unread: Callable[[str], None] | None = None,
    read_elsewhere: Collection[str] = (),
    checks: Sequence[ConfigCheck] = (),
    warn: Callable[[Config], list[str]] | None = None,
) -> Config:
    """Read YAML (optional), expand `${env:...}`, apply `RAG_MONITOR_*__*` overrides,
    validate. `evaluator_check` adds the evaluators' own checks to the same pass, so that
    every problem of a file is reported at once. Raises `ConfigError`.

    `on_unread` is told, one line each, of the `RAG_MONITOR_*` variables that nothing
    reads: neither a config key nor one of `read_elsewhere` (the command line's flags) nor
    a variable the config names (`${env:...}`, `*_env` keys). `checks` run on a config
    that validated, their problems reported with the rest. `warn` says what a config that
    validated holds that is likely not meant; of a file with problems, what it says of the
    rest of the file (without the keys found wrong) goes in the error's `warnings`, so a
    token sent in the clear is not learnt of only once every typo is fixed."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    sources: dict[str, str] = {}
    # Every problem at once: these are reported with the validation's.
    misspelt: list[str] = []
    unexpanded: list[str] = []  # the values whose references could not be expanded
    if path is not None:
        data = read_yaml_file(Path(path))
        if _literal_token(data):
            misspelt.append(
                "receivers.otlp.auth_token: a token is not written into the config file; "
                "put it in an environment variable and write auth_token_env: <VARIABLE> "
                "(or auth_token: ${env:<VARIABLE>})"
            )
            del _otlp_section(data)["auth_token"]  # validated without it, for the rest
        misspelt += _literal_headers(data)
        try:
            sources, env_problems, unexpanded = expand_env_refs(data, env)
        except RecursionError:
            raise ConfigError([f"{path}: invalid YAML: nested too deeply"]) from None
        misspelt += env_problems
    misspelt += [
        p for name in env if name.startswith(ENV_PREFIX) if (p := _single_underscore(name))
    ]
    # The receivers written in the Collector's form only (both forms are refused).
    otlp = _otlp_section(data)
    collector_style = "protocols" in otlp and not any(p in otlp for p in OTLP_PROTOCOLS)
    for key, key_path, value in env_overrides(env, _SECTIONS):
        if collector_style and key_path[:3] in (["receivers", "otlp", p] for p in OTLP_PROTOCOLS):
            # An override in the plain form applies to a file in the Collector form.
            key_path = [*key_path[:2], "protocols", *key_path[2:]]
        apply_override(data, key_path, value)
        sources[".".join(key_path)] = key
    if on_unread is not None:
        named = {*_ENV_NAMES.findall(" ".join(sources.values())), *_env_keys(data)}
        taken = {*(problem.split(":", 1)[0] for problem in misspelt), *read_elsewhere, *named}
        for line in _unread(env, taken, read_elsewhere):
            on_unread(line)
    try:
        config = Config.model_validate(
            data, context={"environ": env, "evaluator_check": evaluator_check}
        )
    except ValidationError as exc:
        problems = validation_problems(exc, Config)
        # The checks across sections run only on a file whose sections all validated:
        # what they would say of this one is added from what can be read, and from the
        # file without the keys found wrong (every problem in one run).
        problems += [p for p in _references(data) if p not in problems]
        context = {"environ": env, "evaluator_check": evaluator_check}
        later, warned = _without_wrong_keys(data, problems, context, checks, env, warn)
        problems += [p for p in later if p not in problems]
    else:
        problems = [p for check in checks for p in check(config, env)]
        if not misspelt and not problems:
            return config
        warned = warn(config) if warn is not None else []
    # A value whose reference could not be expanded is reported as that, not again as
    # missing or as the text written.
    problems = [p for p in problems if not _under(p.split(":", 1)[0], unexpanded)]
    warned = [w for w in warned if not _under(w.split(":", 1)[0], unexpanded)]
    if collector_style:
        problems = [_as_protocols(p) for p in problems]
        warned = [_as_protocols(w) for w in warned]
    raise ConfigError(misspelt + [_blame_env(p, sources) for p in problems], warned)


def _under(key: str, paths: Collection[str]) -> bool:
    """Whether `key` is one of `paths` or a key beneath one."""
    return any(key == path or key.startswith(path + ".") for path in paths)


# Passes over a file that did not validate, each without the keys the last found wrong.
_PASSES = 4


def _without_wrong_keys(
    data: dict[str, Any],
    problems: list[str],
    context: dict[str, Any],
    checks: Sequence[ConfigCheck],
    env: Mapping[str, str],
    warn: Callable[[Config], list[str]] | None,
) -> tuple[list[str], list[str]]:
    """What the checks that need valid sections say of a file that did not validate (a
    section's checks across its keys, the config checks), and what `warn` says of it:
    validated again without the keys `problems` name (their defaults in their place), until
    it validates. A problem or warning about a key taken out, or a key under or above one,
    is left out: it would be about the default in its place, not about what the file says."""
    trial = copy.deepcopy(data)
    taken: list[str] = []
    valued: list[str] = []  # the keys taken out for their value, not for being unknown
    found: list[str] = []
    warned: list[str] = []
    for _ in range(_PASSES):
        wrong = {p.split(": ", 1)[0]: p for p in problems}
        wrong = {where: p for where, p in wrong.items() if _remove(trial, where.split("."))}
        if not wrong:
            break
        taken += wrong
        valued += [
            w for w, p in wrong.items() if not p.partition(": ")[2].startswith("unknown key")
        ]
        try:
            config = Config.model_validate(trial, context=context)
        except ValidationError as exc:
            left = validation_problems(exc, Config)
            problems = [p for p in left if not _about(p, taken, valued)]
            found += problems
            if not problems:
                # Only what stands in for keys taken out fails (a required rule name): the
                # next pass takes out the section holding it, so the rest is still checked.
                problems = [f"{_holder(p.split(': ', 1)[0])}: taken out" for p in left]
            continue
        found += [p for check in checks for p in check(config, env) if not _about(p, taken, valued)]
        if warn is not None:
            warned = [w for w in warn(config) if not _about(w, taken, valued)]
        break
    return found, warned


def _holder(key: str) -> str:
    """The key above `key` that a section holds by name (`alerts.rules.1.name` is held
    by `alerts.rules`: a list entry cannot be taken out without renumbering the rest)."""
    parts = key.split(".")[:-1]
    while parts and parts[-1].isdigit():
        parts.pop()
    return ".".join(parts)


def _remove(data: Any, path: list[str]) -> bool:
    """Takes the key at `path` (a problem's `a.b.0.c`) out of `data`; a list entry is
    emptied of its keys rather than taken out, so the others' indices still name them.
    Whether there was one."""
    node = data
    for n, part in enumerate(path):
        last = n == len(path) - 1
        if isinstance(node, dict) and part in node:
            if last:
                del node[part]
                return True
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            if last:
                return False
            node = node[int(part)]
        else:
            return False
    return False


def _about(problem: str, taken: list[str], valued: list[str]) -> bool:
    """Whether `problem` is about a key taken out (or one under or above it), or about a
    section a key was taken out of for its value (its default in place may be what the
    problem is about: `audit.reference: labels needs labels.http` once a wrong `http` is
    gone). An unknown key was never read: the rest of its section says what it did."""
    where = problem.split(": ", 1)[0]
    section = where.rpartition(".")[0]
    return any(
        where == key or where.startswith(key + ".") or key.startswith(where + ".") for key in taken
    ) or bool(section and any(key.startswith(section + ".") for key in valued))


def _references(data: dict[str, Any]) -> list[str]:
    """`reference_problems` of a file that did not validate, from the values it holds
    that have the right types (the rest were reported by the validation)."""

    def entries(node: Any) -> list[dict[str, Any]]:
        return [e for e in node if isinstance(e, dict)] if isinstance(node, list) else []

    def text(value: Any) -> str | None:
        return value if isinstance(value, str) else None

    def rate(value: Any) -> float | None:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return float(value) if number and 0 <= value <= 1 else None

    raw = data.get("evaluators")
    evaluators = (
        entries(raw) if raw is not None else [{"name": n} for n in DEFAULT_LOCAL_EVALUATORS]
    )
    if not all(isinstance(e.get("name"), str) for e in evaluators):
        return []
    alerts, sampling = (
        s if isinstance(s := data.get(k), dict) else {} for k in ("alerts", "sampling")
    )
    rules = []
    for rule in entries(alerts.get("rules")):
        boost = rule.get("boost")
        rules.append(
            (
                text(rule.get("evaluator")),
                rate(boost.get("sample_rate")) if isinstance(boost, dict) else None,
            )
        )
    base = rate(sampling.get("rate", 1.0))
    return reference_problems(
        [e["name"] for e in evaluators],
        [text(e.get("escalate_from")) for e in evaluators],
        [rate(e.get("sample_rate")) for e in evaluators],
        rules,
        1.0 if base is None else base,
    )


def _single_underscore(name: str) -> str | None:
    """A problem for `RAG_MONITOR_SAMPLING_RATE`, which names a config key with one `_`
    where the levels need `__` (`RAG_MONITOR_SAMPLING__RATE`); None for any other
    variable (one naming no key may hold a secret, such as a judge's API key)."""
    words = name[len(ENV_PREFIX) :].lower().split("_")
    path: list[str] = []
    model: type[BaseModel] | None = Config
    while words and model is not None:
        for n in range(len(words), 0, -1):
            if "_".join(words[:n]) in model.model_fields:
                path.append("_".join(words[:n]))
                words = words[n:]
                model = _model_at(Config, tuple(path))
                break
        else:
            return None
    if words or len(path) < 2:
        return None
    right = ENV_PREFIX + "__".join(path).upper()
    return f"{name}: not read; {'.'.join(path)} is set by {right} (two underscores between levels)"


_ENV_NAMES = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def _env_keys(node: Any) -> Iterator[str]:
    """The variables a config's `*_env` keys name (`judge.api_key_env`, ...)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if str(key).endswith("_env") and isinstance(value, str):
                yield value
            else:
                yield from _env_keys(value)
    elif isinstance(node, list):
        for value in node:
            yield from _env_keys(value)


def _key_variables(model: type[BaseModel], path: tuple[str, ...] = ()) -> Iterator[str]:
    """`RAG_MONITOR_<SECTION>__<KEY>` for every key of `model`'s tree that holds a value
    or a list rather than a section (the names a misspelt variable is nearest to)."""
    for name, field in model.model_fields.items():
        here = (*path, name)
        section = _model_at(model, (name,))
        if section is None or get_origin(field.annotation) is list:
            yield ENV_PREFIX + "__".join(here).upper()
        else:
            yield from _key_variables(section, here)


def _unread(
    environ: Mapping[str, str], taken: Collection[str], flags: Collection[str]
) -> list[str]:
    """One line per `RAG_MONITOR_*` variable that is neither a config key (`__`, or a
    section's name) nor in `taken`, naming the valid name nearest to it."""
    unread = []
    known: dict[str, str] = {}
    for name in environ:
        if not name.startswith(ENV_PREFIX) or name in taken:
            continue
        path = name[len(ENV_PREFIX) :].lower().split("__")
        if len(path) > 1 or path[0] in _SECTIONS:
            continue  # a config override: applied, or reported by validation
        if not known:  # compared without the prefix all names share
            known = {v[len(ENV_PREFIX) :]: v for v in (*flags, *_key_variables(Config))}
        close = difflib.get_close_matches(name[len(ENV_PREFIX) :], known, n=1, cutoff=0.6)
        if close:
            hint = f"did you mean {known[close[0]]}?"
        else:
            listed = f"the flags' variables are {', '.join(flags)}; " if flags else ""
            hint = f"{listed}config keys are set by {ENV_PREFIX}<SECTION>__<KEY>"
        unread.append(f"{name}: not read (no flag or config key has this name); {hint}")
    return unread


def _as_protocols(problem: str) -> str:
    """Name a problem the way the file wrote the key (`protocols.grpc...`)."""
    for name in OTLP_PROTOCOLS:
        plain = f"receivers.otlp.{name}"
        if problem.startswith((f"{plain}.", f"{plain}: ")):
            return f"receivers.otlp.protocols.{name}" + problem[len(plain) :]
    return problem


def _blame_env(problem: str, sources: dict[str, str]) -> str:
    """Name the environment variable behind a problem, so it is not hunted in the YAML."""
    where = problem.split(": ", 1)[0]
    for path, variable in sources.items():
        if where == path or where.startswith(path + ".") or path.startswith(where + "."):
            return f"{problem} (set by {variable})"
    return problem
