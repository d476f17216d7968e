"""What params.yaml says when something in it is wrong: the key, the value, and what is allowed there."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from blocklab.errors import BlocklabError


class ParamsError(BlocklabError):
    """A mistake in params.yaml, worded for the person who made it."""


def not_known(what: str, name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"unknown {what} '{name}' (known: {', '.join(known)}){hint}"


def describe(error: dict, allowed_keys: Callable[[tuple], list[str]], renamed: dict[str, str] | None = None) -> str:
    """One of pydantic's errors as a line a person acts on; `allowed_keys` says which keys may stand where an
    unknown one was written, `renamed` which former key is now called what."""
    loc = tuple(str(p) for p in error["loc"])
    key = ".".join(loc)
    if error["type"] == "extra_forbidden":
        allowed = allowed_keys(loc)
        close = difflib.get_close_matches(loc[-1], allowed, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        if (renamed or {}).get(loc[-1]) in allowed:  # written beside its new name, so not read as it
            hint = f"; it is the former spelling of '{renamed[loc[-1]]}', which is set here too: keep one"
        return f"unknown key '{key}' (allowed here: {', '.join(allowed)}){hint}"
    if error["type"] == "missing":
        return f"'{key}' is required"
    message = error["msg"].removeprefix("Value error, ")
    value = error.get("input")
    if isinstance(value, dict):  # a whole section: its key says where, the message what
        return f"'{key}': {message}"
    return f"'{key}' = {value!r}: {message}" if key else message


def one_error_per_union(errors: list[dict]) -> list[dict]:
    """Pydantic reports a value that fits no member of a union (`final_norm: true | false | null`)
    once per member, each under a tag; a person needs one line naming everything allowed."""
    merged, by_key = [], {}
    for error in errors:
        loc = tuple(error["loc"])
        tag = loc[-1] if loc and isinstance(loc[-1], str) else ""
        if tag == "bool" or tag.startswith("literal["):
            allowed = "true or false" if tag == "bool" else error["msg"].removeprefix("Input should be ")
            if loc[:-1] in by_key:
                by_key[loc[:-1]]["msg"] += f", or {allowed}"
                continue
            error = by_key[loc[:-1]] = {**error, "loc": loc[:-1], "msg": f"Input should be {allowed}"}
        merged.append(error)
    return merged
