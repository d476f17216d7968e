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


def stop_group(pgid: int, grace: float = 10.0) -> None:
    """SIGTERM to every process of group `pgid`, then SIGKILL to whatever is left after `grace` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if not group_members(pgid):
            return
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
