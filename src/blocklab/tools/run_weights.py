"""Where a trained run's weights are (`blocklab sample`'s RUN), and what to do where this machine lacks them: git
keeps each run's record, not its weights, which a DVC remote or the run's own stage provides."""

from __future__ import annotations

import math
import os
from pathlib import Path

from blocklab.errors import BlocklabError
from blocklab.analysis.run_table import RunTable
from blocklab.params.schema import RunSpec
from blocklab.records import run_dir
from blocklab.run.results import MODEL_FILE, SAMPLE_FILE


def run_directory(table: RunTable, runs_dir: Path, name: str) -> Path:
    """The folder of the run `<ablation>/<variant>[/seed<k>]` (default: the ablation's first seed), with an
    error that says what to do where the name is unknown or the run is not trained yet."""
    parts = name.strip("/").split("/")
    if not 2 <= len(parts) <= 3:
        raise BlocklabError(f"'{name}' is not a run: name it <ablation>/<variant> or <ablation>/<variant>/seed<k>")
    ablation, variant = parts[:2]
    spec = table.spec(ablation, variant)  # an unknown name: the table's own error, with "did you mean"
    seeds = spec.seeds
    seed = seeds[0]
    if len(parts) == 3:
        if not (parts[2].startswith("seed") and parts[2][4:].isdigit() and int(parts[2][4:]) in seeds):
            raise BlocklabError(f"{ablation}/{variant} has no run '{parts[2]}': its seeds are "
                                f"{', '.join(f'seed{s}' for s in seeds)}")
        seed = int(parts[2][4:])
    directory = run_dir(Path(runs_dir) / ablation / variant, seed)
    if not (directory / MODEL_FILE).exists():
        raise BlocklabError(weights_not_here(spec, seed, directory))
    return directory


def weights_not_here(spec: RunSpec, seed: int, directory: Path) -> str:
    """What to do for a run whose weights this machine lacks: git keeps its record, not its weights; a DVC remote
    may hold them (`dvc pull`), or its stage trains them again (about how long, from the plan's estimate)."""
    from blocklab.schedule.plan import estimated_seconds
    from blocklab.schedule.train_stages import RECORDS_DIR, stage_name

    stage = stage_name(spec.ablation, is_map=bool(spec.cell))
    cores = os.cpu_count() or 1
    minutes = estimated_seconds(spec) * math.ceil(len(spec.seeds) / cores) / 60  # its seeds side by side, one a core
    remote = default_remote()
    fetch = (f"`dvc pull {stage}` fetches them from the DVC remote '{remote}'" if remote else
             f"`dvc pull {stage}` fetches them where a DVC remote holds them (none is set up here: `dvc remote add`)")
    return (f"{spec.key(seed)}'s weights are not on this machine (no {directory / MODEL_FILE}): git keeps its record "
            f"({RECORDS_DIR / spec.key(seed)}/, what it writes included: {SAMPLE_FILE}), not its weights. {fetch}; or "
            f"`dvc repro {stage}` trains them (without `--allow-missing`, which skips a stage whose only change is "
            f"its missing weights; the corpus first, where it is not here): its {len(spec.seeds)} seeds, about "
            f"{max(minutes, 0.1):.1f} minutes on this machine's {cores} cores.")


def default_remote() -> str | None:
    """The project's default DVC remote, if one is set up."""
    try:
        from dvc.repo import Repo

        with Repo() as repo:
            return repo.config["core"].get("remote")
    except Exception:  # noqa: BLE001 - not a DVC project, or no config: no remote to name
        return None

