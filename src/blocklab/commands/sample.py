"""`blocklab sample`: text from a trained run, as nanoGPT's sample.py writes it."""

from __future__ import annotations

from pathlib import Path

import click

from blocklab.errors import reports_errors
from blocklab.options import former_spelling, params_option
from blocklab.params.former import name_today
from blocklab.schedule.train_stages import RUNS_DIR


@click.command(short_help="Generate text from a trained run, as nanoGPT's sample.py does.")
@click.argument("run")
@click.option("--prompt", default="\n", show_default="a newline", help="Text the samples start from.")
@click.option("--tokens", default=500, show_default=True, type=int, help="Characters to generate per sample.")
@click.option("--temperature", default=0.8, show_default=True, type=float, help="Divides the logits (> 0).")
@click.option("--top-k", default=200, show_default=True, type=int, help="Sample among the k likeliest characters.")
@click.option("--seed", default=1337, show_default=True, type=int, help="Seed of the sampling generator.")
@click.option("--num-samples", default=1, show_default=True, type=int, help="How many samples.")
@click.option("--weights", "runs_dir", default=str(RUNS_DIR), show_default=True, type=click.Path(file_okay=False),
              help="The train stages' outputs, where the runs' weights are.")
@former_spelling("--runs", "--weights", "old_runs_dir", type=click.Path(file_okay=False))
@params_option
@reports_errors
def sample(run: str, prompt: str, tokens: int, temperature: float, top_k: int, seed: int, num_samples: int,
           runs_dir: str, old_runs_dir: str | None, params_file: str) -> None:
    """Generate text from a trained run, RUN = <ablation>/<variant>[/seed<k>] (default: the ablation's first
    seed), as nanoGPT's sample.py does and with its defaults: the context cropped to the model's, logits over
    the temperature, top-k, multinomial. The same seed gives the same text."""
    from blocklab.analysis.run_table import read_run_table
    from blocklab.tools.run_weights import run_directory
    from blocklab.tools.sampling import SampleSettings, sample_run

    settings = SampleSettings(prompt=prompt, tokens=tokens, temperature=temperature, top_k=top_k, seed=seed,
                              num_samples=num_samples)
    directory = run_directory(read_run_table(params_file), Path(old_runs_dir or runs_dir), name_today(run))
    for i, text in enumerate(sample_run(directory, settings)):
        if i:
            click.echo("---------------")
        click.echo(text)
