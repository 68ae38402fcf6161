"""The effective configuration as `check-config` shows it: defaults filled in, secrets
masked."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from monitor.config._fields import MASK, SecretMarker, mask_url
from monitor.config._root import Config


def effective_config(config: Config) -> dict[str, Any]:
    """The whole configuration with defaults filled in, as plain data, secrets masked:
    fields marked `SECRET` and passwords inside URLs (`https://user:<masked>@host`)."""
    return _masked(config)


def _masked(model: BaseModel) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if any(isinstance(m, SecretMarker) for m in info.metadata) and value:
            out[name] = {k: MASK for k in value} if isinstance(value, dict) else MASK
        else:
            out[name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return _masked(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, str):
        return mask_url(value)
    return value
