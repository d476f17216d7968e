"""Command-line options that `blocklab`'s commands and the pipeline's stage scripts share, declared once."""

import click

# Every command and stage that reads the plan takes it from the same option.
params_option = click.option("--params", "params_file", default="params.yaml", show_default=True,
                             type=click.Path(dir_okay=False), help="The experiment plan (params.yaml's format).")
