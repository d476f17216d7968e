"""Command-line options that `blocklab`'s commands and the pipeline's stage scripts share, declared once."""

import click

# Every command and stage that reads the plan takes it from the same option.
params_option = click.option("--params", "params_file", default="params.yaml", show_default=True,
                             type=click.Path(dir_okay=False), help="The experiment plan (params.yaml's format).")


def former_spelling(old: str, new: str, dest: str, **kwargs):
    """An option's former name, hidden from --help: it still works (into `dest`, which the command merges with the
    new option's value) and says once, on standard error, what it is called now."""

    def notice(ctx: click.Context, param: click.Parameter, value):
        if value not in (None, ()):
            click.echo(f"note: {old} is now {new} (the old name still works)", err=True)
        return value

    return click.option(old, dest, hidden=True, callback=notice, **kwargs)
