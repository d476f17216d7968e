"""DVC stage `report`: every ablation's figures, the tables `dvc plots` draws, and reports/summary.md."""

import json
from pathlib import Path

import click

from blocklab import plots
from blocklab.config import load_params
from blocklab.errors import reports_errors
from blocklab.reference import load_reference
from blocklab.report import curves_frame, plot_table, runs_frame, summary_markdown


@click.command()
@click.argument("runs_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("reports_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--params", "params_file", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--reference", "reference_file", default="reference.yaml", show_default=True,
              help="Published figures to show beside ours.")
@reports_errors
def main(runs_dir: Path, reports_dir: Path, params_file: str, reference_file: str) -> None:
    params = load_params(params_file)
    metrics = json.loads((reports_dir / "metrics.json").read_text())
    gradients = json.loads((reports_dir / "gradients.json").read_text())
    figures_dir, tables_dir = reports_dir / "figures", reports_dir / "curves"
    tables_dir.mkdir(parents=True, exist_ok=True)
    figures = {}
    for name, ablation in params.ablations.items():
        curves = curves_frame(params, name, runs_dir)
        runs = runs_frame(params, name, metrics)
        drawn = plots.ablation_figures(name, ablation, curves, runs, metrics["baselines"], figures_dir)
        figures[name] = {kind: str(path.relative_to(reports_dir)) for kind, path in drawn.items()}
        plot_table(curves, "loss").to_csv(tables_dir / f"{name}_loss.csv", index=False)
        plot_table(curves, "grad_norm").to_csv(tables_dir / f"{name}_grad_norm.csv", index=False)
    gradient_figure = plots.gradient_depths(gradients, figures_dir / "gradients.png")
    summary = summary_markdown(params, metrics, load_reference(reference_file), figures, gradients,
                               str(gradient_figure.relative_to(reports_dir)))
    (reports_dir / "summary.md").write_text(summary)
    click.echo(f"{sum(map(len, figures.values())) + 1} figures -> {figures_dir}; {reports_dir}/summary.md")


if __name__ == "__main__":
    main()
