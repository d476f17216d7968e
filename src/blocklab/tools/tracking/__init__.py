"""MLflow: every training run as an MLflow run, logged from the DVC outputs, which stay the source of truth.

Logging happens after training, from the run's files, so a store that is down never costs a result:
`blocklab track` (also the pipeline's `track` stage) logs every run that the store does not have yet,
identified by a run key (a hash of the run's settings and results), so logging twice never duplicates.

Each variant is a parent run (name `<variant>`: the seed means and spreads, the seed-mean curves) with
its seeds nested under it (`<variant>/seed<k>`). A run counts as logged only once all of it landed: its
status is set to FINISHED last, and a run with a key but another status that no process is logging any
more (an upload failed, the process was killed, the server went away) is deleted and logged again.

Several processes may log the same runs to one store at once (queued experiments, a team's machines): each
run is tagged with who logs it and since when. Before finishing a run a process claims its key (a finished
run, else the earliest still being logged, stands; a later one deletes itself), and after finishing it settles
the key (the earliest finished run stands, the others go, their nested runs move under it): `claiming.py`.
Exactly one run per key remains.

The store is filled whatever produced the workspace: the `track` stage is always run by `dvc repro` and `dvc
exp run` (DVC's `always_changed`: the store is outside what DVC can hash), and `blocklab ui` logs what the
store lacks before it serves (after `dvc repro` of one stage, `make demo`, a fresh clone). A variant logged
from its record alone gets its model once its weights are on the machine.
"""

from blocklab.tools.tracking.claiming import RUN_KEY_TAG
from blocklab.tools.tracking.log_runs import track
from blocklab.tools.tracking.payloads import run_key
from blocklab.tools.tracking.store import PARENT_TAG, ensure_store, tracking_uri, workspace_root

__all__ = ["PARENT_TAG", "RUN_KEY_TAG", "ensure_store", "run_key", "track", "tracking_uri", "workspace_root"]
