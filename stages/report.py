"""DVC stage `report`: every ablation's and map's figures, the tables `dvc plots` draws, and reports/summary.md,
from the runs' committed records (reports/runs) and the other stages' reports."""

import json
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import click

from blocklab.analysis import map_plots, plots
from blocklab.analysis.claims import load_claims, verdicts_markdown
from blocklab.analysis.finding_plots import drawn_in
from blocklab.analysis.maps import map_section
from blocklab.analysis.trend_plots import trend_table
from blocklab.analysis.reference import load_reference
from blocklab.analysis.summary import summary_markdown
from blocklab.analysis.run_table import read_run_table
from blocklab.errors import reports_errors
from blocklab.options import params_option


@click.command()
@click.argument("records_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("reports_dir", type=click.Path(file_okay=False, path_type=Path))
@params_option
@click.option("--reference", "reference_file", default="reference.yaml", show_default=True,
              help="Published figures to show beside ours.")
@click.option("--claims", "claims_file", default="claims.yaml", show_default=True,
              help="The claims whose verdicts (reports/claims.json) the summary lists.")
@reports_errors
def main(records_dir: Path, reports_dir: Path, params_file: str, reference_file: str, claims_file: str) -> None:
    table = read_run_table(params_file)
    metrics = json.loads((reports_dir / "metrics.json").read_text())
    gradients = json.loads((reports_dir / "gradients.json").read_text())
    verdicts = json.loads((reports_dir / "claims.json").read_text())
    reference = load_reference(reference_file)
    # Drawing is most of this stage's time (~0.4 s a figure): the ablations are drawn side by side, one worker
    # per core, while this process draws the gradient figure and the maps'.
    claims = load_claims(claims_file, table)
    with ProcessPoolExecutor(max_workers=min(len(table.ablations), os.cpu_count() or 1)) as pool:
        drawing = {name: pool.submit(plots.ablation_outputs, table, name, records_dir, metrics, reports_dir,
                                     reference, claims, verdicts)
                   for name in table.ablations}
        gradient_figure = plots.gradient_depths(gradients, reports_dir / "figures" / "gradients.png")
        map_summary = json.loads((reports_dir / "maps.json").read_text())
        map_figures = {name: map_plots.map_outputs(table, name, metrics, reports_dir, map_summary, claims, verdicts)
                       for name in table.maps}
        figures = {name: future.result() for name, future in drawing.items()}
    labels = {n: e.labels for n, e in table.maps.items()}
    maps = [map_section(table, name, map_summary, map_figures[name],
                        trend_table(claims, verdicts, labels) if "trend" in table.maps[name].figures else "")
            for name in table.maps]
    samples = json.loads((reports_dir / "samples.json").read_text())
    summary = summary_markdown(table, metrics, reference, figures, gradients,
                               str(gradient_figure.relative_to(reports_dir)),
                               verdicts_markdown(claims, verdicts, drawn_in(table, claims, verdicts)), samples,
                               maps)
    (reports_dir / "summary.md").write_text(summary)
    drawn = sum(map(len, figures.values())) + sum(map(len, map_figures.values())) + 1
    click.echo(f"{drawn} figures -> {reports_dir / 'figures'}; "
               f"{reports_dir}/summary.md")


if __name__ == "__main__":
    main()
