"""Process groups: stopping a server with everything it started."""

from __future__ import annotations

import os
import signal
import time

import psutil


def group_members(pgid: int) -> list[psutil.Process]:
    """The live processes of group `pgid` (zombies, which have ended and wait to be reaped, are not)."""
    members = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE:
                members.append(process)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return members


def stop_group(pgid: int, grace: float = 10.0, kill_wait: float = 5.0) -> None:
    """SIGTERM to every process of group `pgid`, then SIGKILL to whatever is left after `grace` seconds (and
    up to `kill_wait` seconds for it to go)."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, kill_wait)):
        if not group_members(pgid):
            return
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)


def stop_within(process, seconds: float) -> None:
    """Stop a server started in a group of its own (`start_new_session`), signalled already or not, within
    `seconds` whatever it does with signals: it and its group get most of the time to end by themselves,
    then SIGTERM, then SIGKILL; the server is reaped."""
    deadline = time.monotonic() + seconds
    own = seconds / 2
    while (process.poll() is None or group_members(process.pid)) and time.monotonic() < deadline - own:
        time.sleep(0.1)
    # what is left of the time, but the few seconds SIGKILL and reaping take
    stop_group(process.pid, grace=max(0.0, deadline - time.monotonic() - 2.0), kill_wait=1.5)
    process.wait(timeout=max(0.1, deadline - time.monotonic()))
