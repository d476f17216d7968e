"""What a trained model writes: nanoGPT's sampling step, and the short sample every run records when it trains.

The context is cropped to the model's `context` before each step (its position embeddings go no further), the
logits divided by the temperature, all but the top k masked, then softmax and `torch.multinomial` with a
generator seeded once per call. Sampling runs on the CPU at one thread (the caller's `torch_threads`), so a seed
gives the same text whatever the machine. The recorded sample is drawn with nanoGPT's `sample.py` defaults
(prompt, temperature, top k, seed) from the run's final weights, after training: it changes no bit of the run.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from blocklab.run.model import build_model
from blocklab.run.settings import ModelConfig

# nanoGPT's sample.py defaults: a newline as the prompt, temperature 0.8, the top 200 characters, seed 1337
PROMPT = "\n"
TEMPERATURE = 0.8
TOP_K = 200
SEED = 1337
RECORDED_CHARACTERS = 200  # the characters a run's recorded sample adds to its prompt


@torch.no_grad()
def generate(model: torch.nn.Module, context: int, prompt: torch.Tensor, tokens: int, temperature: float,
             top_k: int | None, generator: torch.Generator) -> torch.Tensor | None:
    """`tokens` characters after `prompt` (1, T), drawn one at a time from the model's next-character logits;
    None if the logits stop being finite (a model whose weights blew up writes nothing)."""
    idx = prompt
    for _ in range(tokens):
        logits = model(idx[:, -context:])[:, -1, :] / temperature
        if not torch.isfinite(logits).all():
            return None
        if top_k is not None:
            kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, [-1]]
            logits = logits.masked_fill(logits < kth, -float("inf"))
        next_id = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1, generator=generator)
        idx = torch.cat((idx, next_id), dim=1)
    return idx


def recorded_sample(cfg: ModelConfig, weights: dict, chars: list[str]) -> str | None:
    """The text a run records: `RECORDED_CHARACTERS` after nanoGPT's prompt (a newline; the vocabulary's first
    character for a corpus without one), from `weights` (a state dict on the CPU); None if they are not finite."""
    if not all(torch.isfinite(t).all() for t in weights.values() if t.is_floating_point()):
        return None
    model = build_model(cfg, len(chars), seed=0)
    model.load_state_dict(weights)
    model.eval()
    prompt = PROMPT if PROMPT in chars else chars[0]
    ids = generate(model, cfg.context, torch.tensor([[chars.index(prompt)]]), RECORDED_CHARACTERS, TEMPERATURE,
                   TOP_K, torch.Generator().manual_seed(SEED))
    return None if ids is None else "".join(chars[i] for i in ids[0].tolist())
