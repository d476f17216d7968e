"""The settings a figure's runs share, in words, written from the runs' resolved settings: a figure's title says
the learning rate its runs trained at, not prose that restated it (which a `dvc exp run -S ...lr=...` left
behind). What differs between the runs is the figure's legend, so it is left out here."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from blocklab.params.cells import spelled
from blocklab.params.schema import RunSpec
from blocklab.params.words import in_words, rate, setting_value

if TYPE_CHECKING:
    from blocklab.analysis.run_table import RunTable


# (what it says, read from a run's spec): in the order a reader meets them, the model's sizes, then training.
_PARTS: list[Callable[[RunSpec], str]] = [
    lambda s: "a bigram" if s.model.kind == "bigram" else f"{s.model.n_layers} layer{'s' * (s.model.n_layers > 1)}",
    lambda s: "" if s.model.kind == "bigram" else f"width {s.model.d_model}",
    lambda s: "" if s.model.kind == "bigram" else f"{s.model.n_heads} head{'s' * (s.model.n_heads > 1)}",
    lambda s: f"context {s.model.context}",
    lambda s: f"lr {rate(s.train.lr)}",
    lambda s: f"{s.train.steps:,} steps",
    lambda s: f"batch {s.train.batch_size}",
    lambda s: "no warmup" if s.train.warmup == 0 else f"{s.train.warmup}-step warmup",
    lambda s: f"{len(s.seeds)} seed{'s' * (len(s.seeds) > 1)}",
]


def shared_settings(specs: Iterable[RunSpec]) -> str:
    """What every run of `specs` trained with alike, e.g. `6 layers, width 64, 4 heads, context 32, lr 1e-2, 250
    steps, batch 32, 3 seeds` (the warmup left out when the runs differ in it)."""
    specs = list(specs)
    shared = []
    for part in _PARTS:
        said = {part(spec) for spec in specs}
        if len(said) == 1 and (words := said.pop()):
            shared.append(words)
    return ", ".join(shared)


# `{<run>:<setting>}` in a claim's words: that run's resolved setting (a run: `<ablation>/<variant>`, or a map cell's
# `<map>/<variant>/<cell>`); `{<field>}`: a field of the claim's own rule (its tolerance, say).
_SETTING = re.compile(r"\{(?P<run>[A-Za-z_][\w]*/[\w./]+):(?P<setting>\w+)\}")
_OWN_FIELD = re.compile(r"\{(?P<field>[a-z_]+)\}")


def setting_in_words(spec: RunSpec, setting: str) -> str:
    """One resolved setting of a run as the figures write it: a learning rate as 1e-2, a count as 6."""
    return in_words(setting, setting_value(spec.model, spec.train, setting, f"run '{spec.name}'"))


def written(text: str, table: RunTable, own: dict | None = None) -> str:
    """`text` with each `{<run>:<setting>}` written from that run's resolved setting and each `{<field>}` from `own`:
    a claim that says `at lr {placement/post:lr}` reads `at lr 1e-2`, and `at lr 3e-3` after `dvc exp run -S
    ablations.placement.train.lr=0.003`, so its words never state a value the run no longer trains with."""
    text = _SETTING.sub(lambda m: setting_in_words(table.run(m["run"]), m["setting"]), text)
    if own is not None:
        text = _OWN_FIELD.sub(lambda m: spelled(own[m["field"]]) if m["field"] in own else m[0], text)
    return text
