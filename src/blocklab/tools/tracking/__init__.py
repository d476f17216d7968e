"""MLflow: every training run as an MLflow run, logged from the DVC outputs, which stay the source of truth.

Logging happens after training, from the run's files, so a store that is down never costs a result:
`blocklab track` (also the pipeline's `track` stage) logs every run that the store does not have yet,
identified by a run key (a hash of the run's settings and results), so logging twice never duplicates.

Each variant is a parent run (name `<variant>`: the seed means and spreads, the seed-mean curves) with
its seeds nested under it (`<variant>/seed<k>`). A run counts as logged only once all of it landed: its
status is set to FINISHED last, and a run with a key but another status that no process is logging any
more (an upload failed, the process was killed, the server went away) is deleted and logged again.

Several processes may log the same runs to one store at once (queued experiments, a team's machines): each
run is tagged with who logs it and since when, and before finishing a run a process looks for others of
the same key. The earliest-created one that is finished or still being logged stands for the key; a later
one deletes itself (`claim`). Every process reads after it wrote its own run, so of any two the later one
sees the earlier: exactly one run per key remains.
"""

from blocklab.tools.tracking.claiming import RUN_KEY_TAG
from blocklab.tools.tracking.log_runs import track
from blocklab.tools.tracking.payloads import run_key
from blocklab.tools.tracking.store import PARENT_TAG, ensure_store, tracking_uri, ui_addresses, workspace_root

__all__ = ["PARENT_TAG", "RUN_KEY_TAG", "ensure_store", "run_key", "track", "tracking_uri", "ui_addresses",
           "workspace_root"]
