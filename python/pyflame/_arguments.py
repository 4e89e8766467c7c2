"""One-line TypeErrors for calls that match no signature of a bound function.

pyflame._C routes nanobind's "incompatible function arguments" error (a list
of every overload over many lines) here (python/src/errors.cpp); explain()
returns one line naming the function and what is wrong, as Python does for
its own functions: "add(): unexpected keyword argument 'foo'",
"softmax(): argument 'dim' must be int, not str".
"""

import re

from . import _C

_PROBLEM_RANK = {"keyword": 0, "count": 0, "missing": 1, "type": 2}


def _split_top(text, sep):
    """Split at `sep` outside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _parameters(signature):
    """(name, annotation, has_default, kind) of each parameter of a nanobind signature line."""
    end = signature.rindex(") ->") if ") ->" in signature else signature.rindex(")")
    inner = signature[signature.index("(") + 1:end]
    params, kind = [], "positional"
    for p in _split_top(inner, ","):
        if p == "*":
            kind = "keyword"
        elif p == "/":
            continue
        elif p.startswith("**"):
            params.append((p[2:].split(":")[0], None, True, "var_keyword"))
        elif p.startswith("*"):
            params.append((p[1:].split(":")[0], None, True, "var_positional"))
            kind = "keyword"
        else:
            head, _, default = p.partition("=")
            name, _, annotation = head.partition(":")
            params.append((name.strip(), annotation.strip() or None, bool(default), kind))
    return params


def _type_name(value):
    return type(value).__name__


def _matches(value, annotation):
    """Whether nanobind could take `value` for `annotation` (True when unsure)."""
    for option in _split_top(annotation, "|"):
        option = re.sub(r"^typing\.Optional\[(.*)\]$", r"\1 | None", option)
        if "|" in option:
            if _matches(value, option):
                return True
            continue
        if option == "None":
            if value is None:
                return True
        elif option == "int":
            if hasattr(type(value), "__index__"):
                return True
        elif option == "float":
            if hasattr(type(value), "__float__") or hasattr(type(value), "__index__"):
                return True
        elif option == "bool":
            if isinstance(value, bool) or type(value).__name__ == "bool_":
                return True
        elif option == "str":
            if isinstance(value, str):
                return True
        elif option.startswith("pyflame._C."):
            cls = getattr(_C, option[len("pyflame._C."):].split("[")[0], None)
            if cls is None or isinstance(value, cls):
                return True
        else:
            return True
    return False


def _pretty(annotation):
    return annotation.replace("pyflame._C.", "").replace("collections.abc.", "")


def _problem(name, params, args, kwargs):
    """(rank, message) of what keeps the call from matching one signature, or None."""
    positional = [p for p in params if p[3] == "positional"]
    names = {p[0] for p in params if p[3] in ("positional", "keyword")}
    offset = 1 if positional and positional[0][0] == "self" else 0
    if not any(p[3] == "var_keyword" for p in params):
        for key in kwargs:
            if key not in names:
                return _PROBLEM_RANK["keyword"], f"{name}(): unexpected keyword argument '{key}'"
    if len(args) > len(positional) and not any(p[3] == "var_positional" for p in params):
        return _PROBLEM_RANK["count"], (f"{name}(): takes {len(positional) - offset} positional argument"
                                        f"{'' if len(positional) - offset == 1 else 's'} but "
                                        f"{len(args) - offset} were given")
    bound = {}
    for p, value in zip(positional, args):
        if p[0] in kwargs:
            return _PROBLEM_RANK["keyword"], f"{name}(): got multiple values for argument '{p[0]}'"
        bound[p[0]] = value
    bound.update({k: v for k, v in kwargs.items() if k in names})
    for p in params:
        if p[3] in ("positional", "keyword") and not p[2] and p[0] not in bound:
            return _PROBLEM_RANK["missing"], f"{name}(): missing required argument '{p[0]}'"
    for p in params:
        if p[0] in bound and p[1] is not None and p[0] != "self" and not _matches(bound[p[0]], p[1]):
            return _PROBLEM_RANK["type"], (f"{name}(): argument '{p[0]}' must be {_pretty(p[1])}, "
                                           f"not {_type_name(bound[p[0]])}")
    return None


def explain(func, args, kwargs):
    """The one-line message for a call of nanobind function `func` that matched no overload."""
    name = func.__name__
    if name == "__init__" and args:  # a constructor: named by its class, as Python does
        name = type(args[0]).__name__
    signatures = [s[0] for s in func.__nb_signature__]
    problems = [_problem(name, _parameters(s), args, kwargs) for s in signatures]
    found = [p for p in problems if p is not None]
    if found:
        return max(found, key=lambda p: p[0])[1]
    got = ", ".join([_type_name(a) for a in args] + [f"{k}={_type_name(v)}" for k, v in kwargs.items()])
    expected = " or ".join(_pretty(s[len("def "):s.rindex(" ->")] if " ->" in s else s[len("def "):])
                           for s in signatures)
    return f"{name}(): invalid arguments ({got}); expected {expected}"
