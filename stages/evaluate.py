"""DVC stage `evaluate`: gather every run's record (reports/runs) beside the baselines into reports/metrics.json, each variant's
seed statistics into reports/variants.json and each map's LR sensitivities into reports/maps.json (the
metrics `dvc exp show` compares), and every map cell into reports/maps/ (`dvc plots` tables). The wall times of
the runs trained or copied here go to reports/timings.json, which is neither declared nor committed."""

import json
from pathlib import Path

import click

from blocklab.analysis.maps import map_summary, write_tables
from blocklab.analysis.runs import collect, variant_summary
from blocklab.analysis.run_table import read_run_table
from blocklab.errors import reports_errors
from blocklab.options import params_option
from blocklab.json_files import write_json


@click.command()
@click.argument("records_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("baselines_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("reports_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--timings", "timings_dir", type=click.Path(file_okay=False, path_type=Path),
              help="The train stages' outputs, whose runs' wall times (timing.json) go to reports/timings.json "
                   "where they are on this machine.")
@params_option
@reports_errors
def main(records_dir: Path, baselines_file: Path, reports_dir: Path, timings_dir: Path | None, params_file: str) -> None:
    table = read_run_table(params_file)
    metrics, timings = collect(table, records_dir, json.loads(baselines_file.read_text()), timings_dir=timings_dir)
    write_json(reports_dir / "metrics.json", metrics)
    write_json(reports_dir / "timings.json", timings)
    variants = variant_summary(table, metrics)
    write_json(reports_dir / "variants.json", variants, sort_keys=False)
    tables = write_tables(table, metrics, reports_dir / "maps")
    maps = map_summary(table, metrics, tables)
    write_json(reports_dir / "maps.json", maps, sort_keys=False)
    click.echo(f"{len(metrics['runs'])} runs -> {reports_dir}/metrics.json; {len(variants)} variants -> "
               f"{reports_dir}/variants.json; {len(maps)} map lines -> {reports_dir}/maps.json")


if __name__ == "__main__":
    main()
