"""Errors meant for the person at the keyboard, and how commands show them."""

from __future__ import annotations

import atexit
import functools
import gc

import click


class BlocklabError(Exception):
    """A mistake or fault the user can act on; shown as one message, without a traceback."""


def reports_errors(command):
    """Turn a BlocklabError raised by a click command into click's `Error: ...` and exit status 1.

    The process then exits without the garbage collector walking the million objects importing torch
    creates (Python collects while it shuts down: 0.8 s per stage here, 0.2 s with them frozen)."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        atexit.unregister(gc.freeze)  # once, however many commands a process runs
        atexit.register(gc.freeze)
        try:
            return command(*args, **kwargs)
        except BlocklabError as err:
            raise click.ClickException(str(err)) from None

    return wrapper
