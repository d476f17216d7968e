"""`params.yaml`: one typed schema, validated once, with errors a person can act on (blocklab.params.problems).

An ablation is a named entry of shared settings and a dict of variants; a variant is a small
override. What a run trains with is, field by field: the variant's value, else the ablation's,
else `defaults`. A map is an ablation with axes: every variant is crossed with every combination of
the axes' values (its cells), and a cell's axis values come last, over everything else.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    AfterValidator,
    NonNegativeInt,
    PositiveInt,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from blocklab.params.cells import cell_name
from blocklab.params.figures import FigureKind, MapFigureKind
from blocklab.params.former import RENAMED_KEYS, former_plan_names, today
from blocklab.params.problems import ParamsError, describe, not_known, one_error_per_union
from blocklab.params.words import PLACEHOLDER, written_from
from blocklab.run.settings import ModelConfig, TrainConfig

PARAMS_FILE = "params.yaml"
# Ablation and map names become DVC stage names (`train@<ablation>`, `map@<map>`); they and variant names also name
# folders.
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _override_of(cls: type) -> type[BaseModel]:
    """A model with every field of `cls` optional: what a partial override may name."""
    infos = {f.name: cls.__pydantic_fields__[f.name] for f in fields(cls)}
    constrained = {n: Annotated[i.annotation, *i.metadata] if i.metadata else i.annotation for n, i in infos.items()}
    optional = {name: (Optional[annotation], None) for name, annotation in constrained.items()}
    return create_model(f"{cls.__name__}Override", __config__=ConfigDict(extra="forbid"), **optional)


ModelOverride = _override_of(ModelConfig)
TrainOverride = _override_of(TrainConfig)


def _distinct(seeds: list[int]) -> list[int]:
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:  # two runs of one seed are one run, and would share a checkpoint file
        raise ValueError(f"each seed once: {', '.join(map(str, repeated))} repeated")
    return seeds


def _plain_names(names: dict) -> dict:
    odd = [name for name in names if not IDENTIFIER.match(str(name))]
    if odd:
        raise ValueError(f"{', '.join(repr(n) for n in odd)}: a name must be a plain identifier (letters, digits "
                         f"and _, not starting with a digit): it names DVC stages and folders")
    return names


SeedList = Annotated[list[NonNegativeInt], Field(min_length=1), AfterValidator(_distinct)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DataParams(_Strict):
    url: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    val_fraction: float = Field(0.1, gt=0, lt=1)


class Defaults(_Strict):
    model: ModelConfig = ModelConfig()
    train: TrainConfig = TrainConfig()


class Variant(_Strict):
    # What the variant trains with, and nothing else: its train stage depends on exactly these keys.
    model: ModelOverride = ModelOverride()
    train: TrainOverride = TrainOverride()


class _Plan(_Strict):
    # seeds, model and train are required (`{}` for no override): DVC stages depend on these exact keys.
    description: str = ""
    seeds: SeedList
    model: ModelOverride
    train: TrainOverride
    variants: Annotated[dict[str, Variant], Field(min_length=1), AfterValidator(_plain_names)]
    # How figures and reports name each variant in words (default: its name). Apart from the variants, so
    # that renaming one re-draws the report and re-trains nothing. A label writes a number its run trains with
    # as a setting, `{warmup}-step warmup` or `{n_layers:layer}`, filled from the run's resolved settings
    # (blocklab.params.words).
    labels: dict[str, str] = {}
    # Which plan trains it: `default` (`make repro`, the whole default plan within its budget, docs/performance.md)
    # or `extended` (`make repro-extended`: what does not fit, its cost stated there). Both commit their records, so
    # a fresh clone checks both plans' findings without training. Not a run's setting: moving an ablation or a map
    # between the plans retrains nothing.
    plan: Literal["default", "extended"] = "default"

    @model_validator(mode="after")
    def _labels_name_variants(self) -> "_Plan":
        unknown = [name for name in self.labels if name not in self.variants]
        if unknown:
            raise ValueError("; ".join(not_known("variant in labels", name, self.variants) for name in unknown))
        return self


class Ablation(_Plan):
    figures: list[FigureKind] = []  # extra figures beside loss curves, gradient norms and final losses


def _axis_values(values: list) -> list:
    repeated = sorted({str(v) for v in values if values.count(v) > 1})
    if repeated:  # two cells of one value would be one cell
        raise ValueError(f"each value once: {', '.join(repeated)} repeated")
    return values


AxisValues = Annotated[list[Any], Field(min_length=1), AfterValidator(_axis_values)]


def _known_settings(section: str, names: dict) -> dict:
    allowed = [f.name for f in fields(ModelConfig if section == "model" else TrainConfig)]
    unknown = [name for name in names if name not in allowed]
    if unknown:
        raise ValueError("; ".join(not_known(f"{section} setting", name, allowed) for name in unknown))
    return names


class Axes(_Strict):
    """A map's axes: settings of the model and of training, each with the values its cells take."""

    model: Annotated[dict[str, AxisValues], AfterValidator(lambda names: _known_settings("model", names))] = {}
    train: Annotated[dict[str, AxisValues], AfterValidator(lambda names: _known_settings("train", names))] = {}

    @model_validator(mode="after")
    def _some_axis(self) -> "Axes":
        if not self.model and not self.train:
            raise ValueError("a map needs at least one axis, e.g. axes: {train: {lr: [0.001, 0.01, 0.1]}}")
        return self

    def grid(self) -> list[tuple[str, str, list]]:
        """(section, name, values) of every axis, model's first, in the order written."""
        return [("model", n, v) for n, v in self.model.items()] + [("train", n, v) for n, v in self.train.items()]


class Map(_Plan):
    """An ablation with axes: each variant trained in every cell of the axes' grid, every seed."""

    axes: Axes
    figures: list[MapFigureKind] = ["heatmap", "lr"]

    @model_validator(mode="after")
    def _lr_figures_need_an_lr_axis(self) -> "Map":
        wanting = [f for f in self.figures if f not in ("heatmap", "layers", "stream_over_training", "findings", "trend")]
        if wanting and "lr" not in self.axes.train:
            raise ValueError(f"figures {', '.join(wanting)} draw against the learning rate: the map needs an axis "
                             f"train.lr (or draw only: figures: [heatmap])")
        return self

    @model_validator(mode="after")
    def _depth_figure_needs_a_depth_axis(self) -> "Map":
        if "depth" in self.figures and "n_layers" not in self.axes.model:
            raise ValueError("figure depth draws against the number of blocks: the map needs an axis model.n_layers "
                             "(or leave depth out of figures)")
        return self

    @model_validator(mode="after")
    def _variants_leave_axes_alone(self) -> "Map":
        for name, variant in self.variants.items():
            for section, field, _ in self.axes.grid():
                if getattr(getattr(variant, section), field) is not None:
                    raise ValueError(f"variant '{name}' sets {section}.{field}, which is an axis of the map: "
                                     f"its cells set it (drop it from the variant)")
        return self

    @model_validator(mode="after")
    def _labels_leave_axes_alone(self) -> "Map":
        axes = {field for _, field, _ in self.axes.grid()}
        for name, label in self.labels.items():
            named = sorted({m["setting"] for m in PLACEHOLDER.finditer(label)} & axes)
            if named:  # a variant is one line across its cells: one label
                raise ValueError(f"the label of variant '{name}' writes {', '.join(named)}, an axis of the map: its "
                                 f"cells differ in it (the figures say each cell's value)")
        return self


class GradientParams(_Strict):
    depths: list[PositiveInt] = Field([1, 4, 12, 24], min_length=1)
    # Only pre-norm stacks: the probe's loss, mean(stack(x)^2), is blind to a post-norm stack, whose final
    # unit-gain LayerNorm outputs mean square 1 whatever its input (its gradient measures only eps).
    placements: list[str] = Field(["pre"], min_length=1)
    seed: NonNegativeInt = 0

    @field_validator("placements")
    @classmethod
    def _pre_norm_only(cls, placements: list[str]) -> list[str]:
        if any(placement != "pre" for placement in placements):
            raise ValueError("the gradient probe measures pre-norm stacks only: its loss, mean(stack(x)^2), cannot "
                             "see through a post-norm stack's final LayerNorm (mean square 1 whatever the input); "
                             "use placements: [pre]")
        return placements


@dataclass(frozen=True)
class RunSpec:
    """Everything one (ablation, variant) trains with, fully resolved."""

    ablation: str
    variant: str
    label: str
    model: ModelConfig
    train: TrainConfig
    seeds: tuple[int, ...]
    cell: str = ""  # a map's cell (e.g. `lr0.01_w0`); empty for an ablation's variant

    @property
    def name(self) -> str:
        """`<ablation>/<variant>`, or a map cell's `<map>/<variant>/<cell>`."""
        return f"{self.ablation}/{self.variant}" + (f"/{self.cell}" if self.cell else "")

    def key(self, seed: int) -> str:
        return f"{self.name}/seed{seed}"

    def directory(self, variant_dir: Path) -> Path:
        """Where its seeds' folders lie, in its variant's output folder."""
        return Path(variant_dir) / self.cell if self.cell else Path(variant_dir)


class Params(_Strict):
    data: DataParams
    defaults: Defaults = Defaults()
    gradients: GradientParams = GradientParams()
    ablations: Annotated[dict[str, Ablation], Field(min_length=1), AfterValidator(_plain_names)]
    maps: Annotated[dict[str, Map], AfterValidator(_plain_names)] = {}

    @model_validator(mode="after")
    def _one_namespace(self) -> "Params":
        both = sorted(set(self.ablations) & set(self.maps))
        if both:  # their runs share data/runs/<name> and the run keys <name>/...
            raise ValueError(f"{', '.join(both)}: both an ablation and a map; give them different names")
        return self

    def in_plan(self, plan: str) -> list[str]:
        """The ablations and maps (their names, in dvc.yaml's order) that plan `plan` trains."""
        return [name for name, entry in [*self.ablations.items(), *self.maps.items()] if entry.plan == plan]

    def spec(self, ablation: str, variant: str) -> RunSpec:
        if ablation not in self.ablations:
            raise ParamsError(not_known("ablation", ablation, self.ablations))
        abl = self.ablations[ablation]
        if variant not in abl.variants:
            raise ParamsError(not_known(f"variant of ablation '{ablation}'", variant, abl.variants))
        var = abl.variants[variant]
        where = f"ablations.{ablation}.variants.{variant}"
        model = _resolve(self.defaults.model, abl.model, var.model, where)
        train = _resolve(self.defaults.train, abl.train, var.train, where)
        label = written_from(abl.labels.get(variant, variant), model, train, f"ablations.{ablation}.labels.{variant}")
        return RunSpec(ablation, variant, label, model, train, tuple(abl.seeds))

    def specs(self) -> list[RunSpec]:
        """Every ablation's variants (the maps' cells: `map_specs`)."""
        return [self.spec(a, v) for a, abl in self.ablations.items() for v in abl.variants]

    def cells(self, name: str, variant: str) -> list[RunSpec]:
        """Every cell of one variant of map `name`, in grid order (the first axis slowest)."""
        if name not in self.maps:
            raise ParamsError(not_known("map", name, self.maps))
        plan = self.maps[name]
        if variant not in plan.variants:
            raise ParamsError(not_known(f"variant of map '{name}'", variant, plan.variants))
        var, axes = plan.variants[variant], plan.axes.grid()
        # A map's runs are its cells: each is checked as a whole, its axes' values over the variant's and the
        # map's settings (a map-wide warmup an axis replaces is no problem of any run).
        overrides = {section: {**getattr(plan, section).model_dump(exclude_none=True),
                               **getattr(var, section).model_dump(exclude_none=True)} for section in ("model", "train")}
        cells = []
        for values in itertools.product(*(values for _, _, values in axes)):
            settings = {section: dict(overrides[section]) for section in ("model", "train")}
            for (section, field, _), value in zip(axes, values):
                settings[section][field] = value
            set_by_axes = ", ".join(f"{s}.{f}={v!r}" for (s, f, _), v in zip(axes, values))
            named = cell_name([(field, value) for (_, field, _), value in zip(axes, values)])
            where_cell = f"maps.{name}, variant '{variant}', cell {named} ({set_by_axes})"
            fix = (f" (no run could train it: drop that value from maps.{name}.axes, or change the map's or the "
                   f"variant's settings so that every cell trains)")
            cell_model = _replace_checked(self.defaults.model, settings["model"], where_cell, fix)
            cell_train = _replace_checked(self.defaults.train, settings["train"], where_cell, fix)
            resolved = {"model": cell_model, "train": cell_train}
            cell = cell_name([(field, getattr(resolved[section], field)) for section, field, _ in axes])
            label = written_from(plan.labels.get(variant, variant), cell_model, cell_train,
                                 f"maps.{name}.labels.{variant}")
            cells.append(RunSpec(name, variant, label, cell_model, cell_train, tuple(plan.seeds), cell))
        names = [c.cell for c in cells]
        if len(set(names)) < len(names):
            raise ParamsError(f"maps.{name}.axes: two values of one axis make the same cell "
                              f"({', '.join(sorted({n for n in names if names.count(n) > 1}))}): list each value once")
        return cells

    def map_specs(self, name: str | None = None) -> list[RunSpec]:
        """Every cell of every variant of every map (or of map `name`)."""
        return [cell for m, plan in self.maps.items() if name in (None, m) for v in plan.variants
                for cell in self.cells(m, v)]

    def all_specs(self) -> list[RunSpec]:
        """The whole plan: every ablation's variants, then every map's cells."""
        return self.specs() + self.map_specs()

    def runs(self) -> list[tuple[RunSpec, int]]:
        """Every run of the plan, as (its spec, its seed), in `all_specs` order."""
        return [(spec, seed) for spec in self.all_specs() for seed in spec.seeds]

    def runs_of(self, name: str, variant: str) -> list[RunSpec]:
        """An ablation's variant, or every cell of a map's variant."""
        return self.cells(name, variant) if name in self.maps else [self.spec(name, variant)]

    def all_runs_of(self, name: str) -> list[RunSpec]:
        """What one train stage trains: every variant of ablation (or map) `name`, a map's in every cell."""
        if name not in self.ablations and name not in self.maps:
            raise ParamsError(not_known("ablation or map", name, [*self.ablations, *self.maps]))
        plan = self.maps[name] if name in self.maps else self.ablations[name]
        return [spec for variant in plan.variants for spec in self.runs_of(name, variant)]


def _resolve(default, ablation: BaseModel, variant: BaseModel, where: str):
    overrides = {**ablation.model_dump(exclude_none=True), **variant.model_dump(exclude_none=True)}
    return _replace_checked(default, overrides, where)


def _replace_checked(settings, overrides: dict, where: str, fix: str = ""):
    try:
        return replace(settings, **overrides)
    except ValidationError as err:
        problems = [describe(e, _allowed_keys, RENAMED_KEYS) for e in one_error_per_union(err.errors())]
        raise ParamsError(f"{where}: " + "; ".join(problems) + fix) from None


def _allowed_keys(loc: tuple) -> list[str]:
    """The keys that may stand where an unknown key `loc` was written."""
    parent = loc[:-1]
    model_like = {"model": ModelConfig, "train": TrainConfig}
    if parent and parent[-1] in model_like:
        return [f.name for f in fields(model_like[parent[-1]])]
    if parent == ("data",):
        return list(DataParams.model_fields)
    if parent == ("defaults",):
        return list(Defaults.model_fields)
    if parent == ("gradients",):
        return list(GradientParams.model_fields)
    if len(parent) == 2 and parent[0] == "ablations":
        return list(Ablation.model_fields)
    if len(parent) == 2 and parent[0] == "maps":
        return list(Map.model_fields)
    if len(parent) == 3 and parent[0] == "maps" and parent[2] == "axes":
        return list(Axes.model_fields)
    if len(parent) == 4 and parent[2] == "variants":
        return list(Variant.model_fields)
    if parent == ():
        return list(Params.model_fields)
    return []


def parse_params(raw: Any, name: str = PARAMS_FILE) -> Params:
    """params.yaml as YAML reads it, validated; a former spelling (blocklab.params.former) read as today's."""
    renamed = former_plan_names(raw)
    if renamed:
        raise ParamsError(f"{name}: " + "; ".join(renamed))
    try:
        return Params.model_validate(today(raw))
    except ValidationError as err:
        problems = [describe(e, _allowed_keys, RENAMED_KEYS) for e in one_error_per_union(err.errors())]
        raise ParamsError(
            f"{name} has {len(problems)} problem{'s' * (len(problems) > 1)}:\n  - " + "\n  - ".join(problems)
        ) from None


def load_params(path: str | Path = PARAMS_FILE) -> Params:
    """Read and validate params.yaml; every stage calls this before doing any work."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ParamsError(f"{path} not found: run from the repository root or pass --params") from None
    except yaml.YAMLError as err:
        raise ParamsError(f"{path} is not valid YAML: {err}") from None
    params = parse_params(raw, path.name)
    params.specs()  # resolve every variant and every map cell now, so a bad override is reported before any work
    params.map_specs()
    return params
