"""DVC stage `samples`: what the seed-0 model of each variant of some ablations writes, for the summary: the sample
each run recorded when it trained (its record's sample.txt: nanoGPT's prompt, temperature, top k and seed, from the
final weights; blocklab.run.sample). It reads the committed records, never weights: a fresh clone lists them."""

from pathlib import Path

import click

from blocklab.errors import BlocklabError, reports_errors
from blocklab.options import params_option
from blocklab.params.schema import load_params
from blocklab.json_files import write_json
from blocklab.records import read_metrics, run_dir
from blocklab.run.results import SAMPLE_FILE
from blocklab.run.sample import PROMPT, RECORDED_CHARACTERS, SEED, TEMPERATURE, TOP_K
from blocklab.schedule.train_stages import stage_name


@click.command()
@click.argument("records_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--ablation", "ablations", multiple=True, required=True, help="Whose variants to list (repeat).")
@params_option
@reports_errors
def main(records_dir: Path, out: Path, ablations: tuple[str, ...], params_file: str) -> None:
    params = load_params(params_file)
    samples = {}
    for ablation in ablations:
        for variant in params.ablations[ablation].variants:
            spec = params.spec(ablation, variant)
            directory = run_dir(records_dir / ablation / variant, spec.seeds[0])
            if not (directory / "metrics.json").exists():
                raise BlocklabError(f"{spec.key(spec.seeds[0])} has no record in {directory}: run "
                                    f"`dvc repro {stage_name(ablation)}`")
            sample = directory / SAMPLE_FILE  # none where the run's weights are not finite: it writes nothing
            samples[f"{ablation}/{variant}"] = {"run": spec.key(spec.seeds[0]),
                                                "text": sample.read_text() if sample.exists() else None,
                                                "val_loss": read_metrics(directory)["val_loss"]}
    write_json(out, {"settings": {"prompt": PROMPT, "tokens": RECORDED_CHARACTERS, "temperature": TEMPERATURE,
                                  "top_k": TOP_K, "seed": SEED}, "samples": samples}, sort_keys=False)
    click.echo(f"{len(samples)} samples of {RECORDED_CHARACTERS} characters -> {out}")


if __name__ == "__main__":
    main()
