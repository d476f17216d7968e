"""A run's setting in words, as its label, its figures' titles and its claims write it: a learning rate as 1e-2, a
count as 6, `{n_layers:layer}` as `6 layers`. A label written `post-norm + {warmup}-step warmup` says the warmup
the run trains with, so a `dvc exp run -S ...warmup=150` leaves no legend saying 100."""

from __future__ import annotations

import math
import re
from dataclasses import fields

from blocklab.params.cells import spelled
from blocklab.params.problems import ParamsError, not_known
from blocklab.run.settings import ModelConfig, TrainConfig

# Words a label may use that no single setting holds, read from the resolved settings.
DERIVED = {"head_size": lambda model, train: model.d_model // model.n_heads}

# `{<setting>}`: the setting's value in words; `{<setting>:<noun>}`: the value and the noun, plural unless it is 1.
PLACEHOLDER = re.compile(r"\{(?P<setting>[a-z_]+)(?::(?P<noun>[A-Za-z -]+))?\}")


def rate(value: float) -> str:
    """A learning rate as papers write it: 1e-2, 3e-3, 2.5e-4 (0.01 -> 1e-2)."""
    exponent = math.floor(math.log10(value))
    mantissa = round(value / 10 ** exponent, 6)
    if mantissa >= 10:  # 9.9999999e-3 rounded up
        mantissa, exponent = mantissa / 10, exponent + 1
    return f"{mantissa:g}e{exponent}"


def setting_value(model: ModelConfig, train: TrainConfig, setting: str, where: str):
    """The resolved value of `setting` (a field of the model's or the training's settings, or a DERIVED word)."""
    for section in (model, train):
        if setting in {f.name for f in fields(section)}:
            return getattr(section, setting)
    if setting in DERIVED:
        return DERIVED[setting](model, train)
    known = sorted({f.name for section in (model, train) for f in fields(section)} | set(DERIVED))
    raise ParamsError(not_known(f"setting in {where}", setting, known))


def in_words(setting: str, value) -> str:
    """A value as the figures write it: a learning rate, and any rate below 1e-2 (z-loss's), as 1e-2; else 6, 0.5."""
    if setting == "lr" or (isinstance(value, float) and 0 < value < 0.01):
        return rate(value)
    return spelled(value)


def written_from(text: str, model: ModelConfig, train: TrainConfig, where: str) -> str:
    """`text` with each `{<setting>}` and `{<setting>:<noun>}` written from the resolved settings: a label
    `{n_layers:layer} with residuals` reads `1 layer with residuals` and `4 layers with residuals`."""
    def one(match: re.Match) -> str:
        value = setting_value(model, train, match["setting"], where)
        words = in_words(match["setting"], value)
        if match["noun"] is None:
            return words
        return f"{words} {match['noun']}{'' if value == 1 else 's'}"
    return PLACEHOLDER.sub(one, text)
