"""params.yaml resolved once: the table every stage after training reads.

A run's settings are resolved (defaults, its ablation's or map's, its variant's, a map cell's axes) by
`blocklab.params.schema`; a stage does it once, `RunTable.of(load_params(...))`, and passes the table down. The
analysis reads the table and never goes back to params.yaml: it holds, for every ablation and map, its variants'
labels, seeds, figures, axes and every run's `RunSpec`, and for every run, its key and the stage that trains it.
The table pickles, so the report stage's drawing workers receive it whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from blocklab.params.problems import ParamsError, not_known
from blocklab.params.schema import PARAMS_FILE, Params, RunSpec, load_params, parse_params
from blocklab.schedule.train_stages import stage_name

Axis = tuple[str, str, tuple]  # (section, setting, values): `("train", "lr", (0.001, 0.01))`


@dataclass(frozen=True)
class PlanEntry:
    """One entry of params.yaml's `ablations:` or `maps:`, resolved."""

    name: str
    is_map: bool
    description: str
    seeds: tuple[int, ...]
    labels: dict[str, str]  # every variant, in params.yaml's order -> how figures and tables name it, written
    figures: tuple[str, ...]  # the figures it asks for beside those every ablation gets
    axes: tuple[Axis, ...]  # a map's axes, in grid order (the first slowest); empty for an ablation
    specs: tuple[RunSpec, ...]  # an ablation's variants; a map's every cell, variant by variant
    plan: str = "default"  # which plan trains it: default (make repro) or extended (make repro-extended)

    @property
    def variants(self) -> list[str]:
        return list(self.labels)

    @property
    def stage(self) -> str:
        """The DVC stage that trains its runs."""
        return stage_name(self.name, is_map=self.is_map)

    def has_axis(self, section: str, setting: str) -> bool:
        return any((s, f) == (section, setting) for s, f, _ in self.axes)

    def runs(self) -> list[tuple[RunSpec, int]]:
        return [(spec, seed) for spec in self.specs for seed in spec.seeds]


def _entry(params: Params, name: str, is_map: bool) -> PlanEntry:
    plan = params.maps[name] if is_map else params.ablations[name]
    specs = params.map_specs(name) if is_map else [params.spec(name, variant) for variant in plan.variants]
    axes = tuple((s, f, tuple(values)) for s, f, values in plan.axes.grid()) if is_map else ()
    labels = {variant: next(spec.label for spec in specs if spec.variant == variant) for variant in plan.variants}
    return PlanEntry(name, is_map, plan.description, tuple(plan.seeds), labels, tuple(plan.figures), axes,
                     tuple(specs), plan.plan)


@dataclass(frozen=True)
class RunTable:
    """Every run of the plan, resolved: its ablations, then its maps."""

    corpus_sha256: str  # the corpus the runs trained on (params.yaml's data.sha256)
    ablations: dict[str, PlanEntry]
    maps: dict[str, PlanEntry]

    @classmethod
    def of(cls, params: Params) -> RunTable:
        return cls(params.data.sha256, {name: _entry(params, name, False) for name in params.ablations},
                   {name: _entry(params, name, True) for name in params.maps})

    def entry(self, name: str) -> PlanEntry:
        """Ablation or map `name`."""
        found = self.ablations.get(name) or self.maps.get(name)
        if found is None:
            raise ParamsError(not_known("ablation or map", name, [*self.ablations, *self.maps]))
        return found

    def spec(self, ablation: str, variant: str) -> RunSpec:
        """An ablation's variant."""
        if ablation not in self.ablations:
            raise ParamsError(not_known("ablation", ablation, self.ablations))
        entry = self.ablations[ablation]
        if variant not in entry.labels:
            raise ParamsError(not_known(f"variant of ablation '{ablation}'", variant, entry.labels))
        return next(spec for spec in entry.specs if spec.variant == variant)

    def run(self, name: str) -> RunSpec:
        """`<ablation>/<variant>`, or a map cell's `<map>/<variant>/<cell>`."""
        parts = name.split("/")
        if len(parts) == 2 and parts[0] in self.ablations:
            return self.spec(*parts)
        entry = self.entry(parts[0])
        found = next((spec for spec in entry.specs if spec.name == name), None)
        if found is None:
            raise ParamsError(not_known(f"run of {'map' if entry.is_map else 'ablation'} '{entry.name}'", name,
                                        [spec.name for spec in entry.specs]))
        return found

    def specs(self) -> list[RunSpec]:
        """Every ablation's variants (the maps' cells: `map_specs`)."""
        return [spec for entry in self.ablations.values() for spec in entry.specs]

    def map_specs(self, name: str | None = None) -> list[RunSpec]:
        """Every cell of every map's every variant (or of map `name`)."""
        return [spec for entry in self.maps.values() if name in (None, entry.name) for spec in entry.specs]

    def runs(self) -> list[tuple[RunSpec, int]]:
        """Every run, as (its spec, its seed): the ablations', then the maps'."""
        return [run for entry in (*self.ablations.values(), *self.maps.values()) for run in entry.runs()]

    def training_stages(self) -> dict[str, str]:
        """{run key: the DVC stage that trains it (`train@<ablation>`, `map@<map>`)}."""
        return {spec.key(seed): entry.stage for entry in (*self.ablations.values(), *self.maps.values())
                for spec, seed in entry.runs()}


def read_run_table(params_file: str | Path = PARAMS_FILE) -> RunTable:
    """params.yaml, validated and resolved: what a stage reads once and passes down."""
    return RunTable.of(load_params(params_file))


def run_table_of(raw: dict) -> RunTable:
    """params.yaml's contents as another revision holds them (what DVC's params_show reads), resolved."""
    return RunTable.of(parse_params(raw))
