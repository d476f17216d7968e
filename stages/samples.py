"""DVC stage `samples`: what the seed-0 model of each variant of some ablations writes, for the summary."""

from pathlib import Path

import click

from blocklab.errors import reports_errors
from blocklab.options import params_option
from blocklab.run.config import load_params
from blocklab.run.results import read_metrics, write_json
from blocklab.tools.sampling import SampleSettings, run_directory, sample_run


@click.command()
@click.argument("runs_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--ablation", "ablations", multiple=True, required=True, help="Whose variants to sample (repeat).")
@click.option("--tokens", default=200, show_default=True, help="Characters per sample.")
@params_option
@reports_errors
def main(runs_dir: Path, out: Path, ablations: tuple[str, ...], tokens: int, params_file: str) -> None:
    params = load_params(params_file)
    settings = SampleSettings(tokens=tokens)  # nanoGPT's prompt, temperature, top-k and seed
    samples = {}
    for ablation in ablations:
        for variant in params.ablations[ablation].variants:
            directory = run_directory(params, runs_dir, f"{ablation}/{variant}")
            (text,) = sample_run(directory, settings)
            samples[f"{ablation}/{variant}"] = {"run": f"{ablation}/{variant}/{directory.name}", "text": text,
                                                "val_loss": read_metrics(directory)["val_loss"]}
    write_json(out, {"settings": {"prompt": settings.prompt, "tokens": settings.tokens,
                                  "temperature": settings.temperature, "top_k": settings.top_k,
                                  "seed": settings.seed}, "samples": samples}, sort_keys=False)
    click.echo(f"{len(samples)} samples of {settings.tokens} characters -> {out}")


if __name__ == "__main__":
    main()
