"""What a trained model writes: nanoGPT's `sample.py`, from a run's saved weights (the sampling step itself, and
the short sample every run records when it trains: `blocklab.run.sample`). Sampling runs on the CPU with one
thread, so a seed gives the same text whatever the machine's thread count.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from blocklab.errors import BlocklabError
from blocklab.run.settings import ModelConfig
from blocklab.run.model import build_model
from blocklab.run.sample import PROMPT, SEED, TEMPERATURE, TOP_K, generate
from blocklab.run.results import MODEL_FILE, MODEL_FORMAT
from blocklab.run.threads import torch_threads


@dataclass(frozen=True)
class SampleSettings:
    """nanoGPT's `sample.py` defaults, so that samples are comparable (it draws 10 samples; one here)."""

    prompt: str = PROMPT
    tokens: int = 500
    temperature: float = TEMPERATURE
    top_k: int | None = TOP_K
    seed: int = SEED
    num_samples: int = 1

    def __post_init__(self):
        if not self.temperature > 0:
            raise BlocklabError(f"--temperature must be positive (got {self.temperature}): it divides the logits")
        if self.top_k is not None and self.top_k < 1:
            raise BlocklabError(f"--top-k must be a positive number of characters (got {self.top_k})")
        if self.tokens < 0 or self.num_samples < 1:
            raise BlocklabError("--tokens must be 0 or more and --num-samples at least 1")


def read_model(directory: Path) -> tuple[torch.nn.Module, ModelConfig, list[str]]:
    """A trained run's model rebuilt from its `model.pt` (eval mode, on the CPU), its settings and vocabulary."""
    saved = torch.load(Path(directory) / MODEL_FILE, map_location="cpu", weights_only=True)
    if saved.get("format") != MODEL_FORMAT:
        raise BlocklabError(f"{Path(directory) / MODEL_FILE} has format {saved.get('format')}, not "
                            f"{MODEL_FORMAT}: train it again (`dvc repro`)")
    cfg = ModelConfig(**saved["model"])
    model = build_model(cfg, len(saved["chars"]), seed=0)
    model.load_state_dict(saved["state_dict"])
    return model.eval(), cfg, saved["chars"]


def sample_run(directory: Path, settings: SampleSettings = SampleSettings()) -> list[str]:
    """`settings.num_samples` texts from the run in `directory`, each the prompt and what the model adds."""
    model, cfg, chars = read_model(directory)
    index = {c: i for i, c in enumerate(chars)}
    unknown = sorted(set(settings.prompt) - set(index))
    if unknown:
        raise BlocklabError(f"the prompt has characters this model never saw: {', '.join(map(repr, unknown))} "
                            f"(its vocabulary: {''.join(chars)!r})")
    if not settings.prompt:
        raise BlocklabError("the prompt is empty: give at least one character (nanoGPT's default is a newline)")
    prompt = torch.tensor([[index[c] for c in settings.prompt]])
    generator = torch.Generator().manual_seed(settings.seed)
    texts = []
    with torch_threads(1):
        for _ in range(settings.num_samples):
            ids = generate(model, cfg.context, prompt, settings.tokens, settings.temperature, settings.top_k, generator)
            if ids is None:
                raise BlocklabError(f"{directory}: the model's logits are not finite (its training blew up): it "
                                    f"writes nothing")
            texts.append("".join(chars[i] for i in ids[0].tolist()))
    return texts
