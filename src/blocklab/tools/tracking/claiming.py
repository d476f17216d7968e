"""Several processes logging the same runs to one store at once: each run tagged with who logs it and since when.
Before it finishes a run, a process claims its key (`claim`): a finished run of the key, else the earliest of those
still being logged, stands, and a later one deletes itself; that saves most of a doubled logging. After it finishes
one, it settles the key (`settle`): of the finished runs, the earliest stands and the others are deleted, their
nested runs moved under it. The claim alone cannot promise one run a key: a run's "since" is taken before its
creation reaches the store, so a run created after another's claim can carry the earlier time and both claim; the
settling can, since the last process to finish sees every finished run. A run left unfinished by a process that is
gone is deleted and logged again."""

from __future__ import annotations
from blocklab.tools.tracking.store import EXPERIMENT_IDS

import os
import socket
import time




RUN_KEY_TAG = "blocklab.run_key"




LOGGER_TAG = "blocklab.logger"  # <host>:<pid> of the process that logs the run


SINCE_TAG = "blocklab.logging_since"  # when that process created it (time.time())


# An unfinished run whose logger is on another machine counts as abandoned after this long.
ABANDONED_SECONDS = 600


COMPLETE = "FINISHED"


def stored_runs(client, ablations: list[str]) -> dict[str, list]:
    """Every active run with a run key, by key (complete or not)."""
    found: dict[str, list] = {}
    for name in ablations:
        experiment = client.get_experiment_by_name(f"blocklab/{name}")
        if experiment is None:
            continue
        EXPERIMENT_IDS[client.tracking_uri, f"blocklab/{name}"] = experiment.experiment_id
        for run in client.search_runs([experiment.experiment_id], max_results=50000):
            if RUN_KEY_TAG in run.data.tags:
                found.setdefault(run.data.tags[RUN_KEY_TAG], []).append(run)
    return found


def complete_run(runs: list):
    """The run among `runs` that landed whole, if any."""
    return next((run for run in runs if run.info.status == COMPLETE), None)


def _abandoned(run) -> bool:
    """An unfinished run that no process is logging any more: its logger on this machine has exited (or is
    this very process, which logs one run at a time), or on another machine started over ABANDONED_SECONDS ago."""
    import psutil

    host, _, pid = run.data.tags.get(LOGGER_TAG, "").rpartition(":")
    if not pid.isdigit():
        return True
    if host == socket.gethostname():
        return int(pid) == os.getpid() or not psutil.pid_exists(int(pid))
    return time.time() - float(run.data.tags.get(SINCE_TAG, 0)) > ABANDONED_SECONDS


def delete_incomplete(client, runs: list) -> None:
    """Runs an interrupted logging left behind: they are replaced, never counted. A run another process is
    still logging is left to it."""
    for run in runs:
        if run.info.status != COMPLETE and _abandoned(run):
            client.delete_run(run.info.run_id)


def _with_key(client, experiment_id: str, key: str) -> list:
    return client.search_runs([experiment_id], f"tags.`{RUN_KEY_TAG}` = '{key}'", max_results=1000)


def claim(client, experiment_id: str, key: str, run_id: str) -> str:
    """Which run stands for `key` now that `run_id` is logged but not finished: a finished one, else the
    earliest of those still being logged. If not ours, ours is deleted. Two processes may both keep theirs (see
    the module's note): `settle` after finishing decides between them."""
    found = _with_key(client, experiment_id, key)
    others = [r for r in found if r.info.run_id != run_id]
    done = [r for r in others if r.info.status == COMPLETE]
    if done:
        winner = done[0].info.run_id
    else:
        ours = next((r for r in found if r.info.run_id == run_id), None) or client.get_run(run_id)
        candidates = [ours] + [r for r in others if not _abandoned(r)]
        winner = min(candidates, key=lambda r: (float(r.data.tags.get(SINCE_TAG, 0)), r.info.run_id)).info.run_id
    if winner != run_id:
        client.delete_run(run_id)
    return winner


def _since(run) -> tuple[float, str]:
    return float(run.data.tags.get(SINCE_TAG, 0)), run.info.run_id


def settle(client, experiment_id: str, key: str, parent_tag: str) -> str:
    """The one finished run that stands for `key`: the earliest (by its since-tag, then id) of the finished ones.
    The others are deleted, and the runs nested under them (their `parent_tag`) move under it. Every process
    settles each key it finishes; whatever any of them sees, the earliest finished run is never deleted, and the
    last to finish sees them all. (Called once a run of `key` is finished, it finds one: a finished run is deleted
    only in favour of an earlier finished one.)"""
    done = sorted((r for r in _with_key(client, experiment_id, key) if r.info.status == COMPLETE), key=_since)
    standing = done[0].info.run_id
    for loser in done[1:]:
        client.delete_run(loser.info.run_id)
        for child in client.search_runs([experiment_id], f"tags.`{parent_tag}` = '{loser.info.run_id}'",
                                        max_results=1000):
            client.set_tag(child.info.run_id, parent_tag, standing)
    return standing
