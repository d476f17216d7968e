"""Errors meant for the person at the keyboard, and how commands show them."""

from __future__ import annotations

import functools

import click


class BlocklabError(Exception):
    """A mistake or fault the user can act on; shown as one message, without a traceback."""


def reports_errors(command):
    """Turn a BlocklabError raised by a click command into click's `Error: ...` and exit status 1."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except BlocklabError as err:
            raise click.ClickException(str(err)) from None

    return wrapper
