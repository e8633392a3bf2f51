"""A gate config given as a dict, written as the TOML `qtransit check --config` reads.

Keys are the config file's (README "The gate's config"): {"gate": {...}, "scaling": [{...}],
"budget": [{...}]}. Values: str, bool, int, float, lists of them, dicts (tables), lists of dicts
(arrays of tables). Anything else is refused by name.
"""

import json
import math


def _value(v, where):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(e, f"{where}[{i}]") for i, e in enumerate(v)) + "]"
    raise ValueError(f"config: {where}: a {type(v).__name__} has no TOML form (str, bool, int, float, list, dict)")


def _key(k, where):
    if not isinstance(k, str):
        raise ValueError(f"config: {where}: key {k!r} is not a string")
    return k if k and all(c.isalnum() or c in "-_" for c in k) else json.dumps(k)


def _table(d, where, lines):
    subs = []
    for k, v in d.items():
        key = _key(k, where)
        if isinstance(v, dict) or (isinstance(v, (list, tuple)) and v and all(isinstance(e, dict) for e in v)):
            subs.append((key, v))
        else:
            lines.append(f"{key} = {_value(v, where + '.' + str(k) if where else str(k))}")
    for key, v in subs:
        path = f"{where}.{key}" if where else key
        if isinstance(v, dict):
            lines.append(f"\n[{path}]")
            _table(v, path, lines)
        else:
            for e in v:
                lines.append(f"\n[[{path}]]")
                _table(e, path, lines)


def dumps(config):
    if not isinstance(config, dict):
        raise ValueError(f"config: a {type(config).__name__}; give a dict, a TOML file's path, or None (the default gate)")
    lines = []
    _table(config, "", lines)
    return "\n".join(lines) + "\n"
