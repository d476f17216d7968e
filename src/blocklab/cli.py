"""The `blocklab` command: what a user runs besides `dvc repro`."""

from __future__ import annotations

import importlib
from dataclasses import asdict
from pathlib import Path

import click

from blocklab.errors import reports_errors
from blocklab.options import former_spelling, params_option
from blocklab.params.former import name_today
from blocklab.schedule.stages import ENCODED, RECORDS_DIR, RUNS_DIR, STORE_DIR
from blocklab.params.schema import load_params



# How `blocklab --help` groups the commands: what a user runs, then what a developer of blocklab runs.
SECTIONS = {"Try it": ["demo"],
            "Run the plan": ["prefetch", "params", "store"],
            "Look at the results": ["check", "diff", "sample", "track", "ui"],
            "Check the bits": ["fingerprint", "audit"],
            "For blocklab's developers": ["bench", "docs"]}


# The developers' commands live in their own module, loaded when one is run or listed: their options are half
# of a long module, and editing them would otherwise touch what the `check` and `track` stages run.
LAZY_COMMANDS = {"bench": "blocklab.developer_commands:bench", "docs": "blocklab.developer_commands:docs"}


class SectionedGroup(click.Group):
    """A group whose help lists its commands under SECTIONS' headings, in their order; LAZY_COMMANDS load on use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in LAZY_COMMANDS and name not in self.commands:
            module, attribute = LAZY_COMMANDS[name].split(":")
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return self.commands.get(name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        commands = {name: self.get_command(ctx, name) for name in self.list_commands(ctx)}
        names = max(map(len, commands))  # one column width in every section
        sections = {**SECTIONS, "Other commands": sorted(set(commands) - {n for ns in SECTIONS.values() for n in ns})}
        for heading, names_in in sections.items():
            rows = [(name.ljust(names), commands[name].get_short_help_str(formatter.width - 6 - names))
                    for name in names_in if name in commands]
            if rows:
                with formatter.section(heading):
                    formatter.write_dl(rows)


@click.group(cls=SectionedGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="blocklab", prog_name="blocklab", message="%(prog)s %(version)s")
def main() -> None:
    """Take a Transformer block apart: train a small character-level Transformer on Tiny Shakespeare with and
    without each ingredient, and check what each does against the published findings.

    \b
    make demo     the lesson's own experiments and their findings, in about two minutes
    make repro    the whole plan (blocklab prefetch, then dvc repro)
    See README.md."""


@main.command(short_help="The lesson's table A trained, checked, drawn and sampled: ~2 min.")
@params_option
@reports_errors
def demo(params_file: str) -> None:
    """The way in (`make demo`): train the lesson's own experiments - table A's post-norm, pre-norm and
    warmed-up post-norm at lr 1e-2, and pre-norm with and without residuals, the 6-layer TinyLM, every seed
    the default plan has - through the pipeline (`blocklab prefetch`, then `dvc repro` of those stages);
    check the findings those runs decide; draw their figure; print what a collapsed and a healthy model
    write; say what to run next. About two minutes on two cores.

    Its runs are the default plan's own: a later `make repro` copies them instead of training them again.
    Its figure and verdicts go to data/demo/ (reports/ keeps the committed run's)."""
    from blocklab.tools.demo import run_demo

    run_demo(params_file)


@main.command("params", short_help="Validate params.yaml; print every run's settings.")
@params_option
@reports_errors
def show_params(params_file: str) -> None:
    """Validate params.yaml and print every run's fully resolved settings: each ablation's variants, then
    each map's cells (a map's variant crossed with its axes)."""
    import pandas as pd

    params = load_params(params_file)
    rows = []
    for spec in params.all_specs():
        rows.append({"ablation": spec.ablation, "variant": spec.variant, "cell": spec.cell or "-",
                     "seeds": ",".join(map(str, spec.seeds)), **asdict(spec.model), **asdict(spec.train)})
    click.echo(pd.DataFrame(rows).to_string(index=False))


@main.command(short_help="Train the runs `dvc repro` will need, all at once.")
@click.argument("targets", nargs=-1)
@click.option("--workers", type=int, default=None,
              help="Local worker processes, one thread each [default: one per core].")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="A Dask scheduler (tcp://host:8786) to train on instead of the local workers "
                   "[default: $BLOCKLAB_DASK_SCHEDULER, else the local workers].")
@click.option("--dry-run", is_flag=True, help="Only say which stages are out of date and how many runs would train.")
@click.option("--store", "store_dir", default=str(STORE_DIR), show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="The run store (blocklab.schedule.run_store).")
@params_option
@reports_errors
def prefetch(targets: tuple[str, ...], workers: int | None, scheduler: str | None, dry_run: bool, store_dir: Path,
             params_file: str) -> None:
    """Train every run that `dvc repro [TARGETS...]` is about to need, all at once, into the run store; then
    `dvc repro` copies them and trains nothing.

    The runs of the train and map stages that DVC reports out of date (among TARGETS and what they depend
    on, as `dvc repro TARGETS` would run them; default: the whole pipeline), less those DVC would restore
    from its run cache and those the run store holds, train longest first: on the Dask cluster when a
    scheduler is set, else in one-thread workers on this machine, one per core. Each result goes into the
    store the moment it is back: an interruption (Ctrl-C, a lost machine) loses only the runs still training.
    The stages that train nothing before them (download, encode) are reproduced first, through DVC."""
    from blocklab.schedule.prefetch import prefetch_reported

    prefetch_reported(load_params(params_file), tuple(name_today(target) for target in targets), workers, scheduler,
                      dry_run, store_dir)


@main.command(short_help="What the run store holds and the plan uses; --prune the rest.")
@click.option("--prune", is_flag=True, help="Remove the entries no run of params.yaml needs with today's code, "
                                            "corpus and torch, and what interrupted writes left.")
@click.option("--store", "store_dir", default=str(STORE_DIR), show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="The run store (blocklab.schedule.run_store).")
@click.option("--encoded", default=str(ENCODED), show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="The encoded corpus the plan's runs train on.")
@params_option
@reports_errors
def store(prune: bool, store_dir: Path, encoded: Path, params_file: str) -> None:
    """What the run store holds: its entries and their size, and how many of them the plan in params.yaml uses
    (with today's training code, corpus and torch: an entry made by other code is never used again). With
    --prune, remove the rest."""
    from blocklab.schedule.run_store import store_reported

    store_reported(store_dir, encoded, params_file, prune)


@main.command(short_help="Generate text from a trained run, as nanoGPT's sample.py does.")
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


@main.command(short_help="Every finding's verdict, on what has run here.")
@click.option("--claims", "claims_file", default="claims.yaml", show_default=True, type=click.Path(dir_okay=False),
              help="The claims to verify.")
@click.option("--metrics", "metrics_file", default="reports/metrics.json", show_default=True,
              type=click.Path(dir_okay=False), help="Metrics written by the `evaluate` stage.")
@click.option("--gradients", "gradients_file", default="reports/gradients.json", show_default=True,
              type=click.Path(dir_okay=False), help="Written by the `gradients` stage.")
@click.option("--records", "runs_dir", default=str(RECORDS_DIR), show_default=True, type=click.Path(file_okay=False),
              help="The runs' records (committed; or the train stages' outputs, data/runs), whose curves window(...) "
                   "and at(...) read.")
@former_spelling("--runs", "--records", "old_runs_dir", type=click.Path(file_okay=False))
@click.option("--reference", "reference_file", default="reference.yaml", show_default=True,
              type=click.Path(dir_okay=False), help="The published figures, with the corpus each was published on.")
@params_option
@click.option("--out", default="reports/claims.json", show_default=True, type=click.Path(dir_okay=False),
              help="Where to write the verdicts (when some claims have not run here, only if given).")
@click.option("--count-out", default=None, type=click.Path(dir_okay=False),
              help="Where to write how many findings hold and checks are exact, a DVC metric  "
                   "[default: claims_count.json beside --out]")
@click.option("--strict", is_flag=True,
              help="Exit 1 when a claim that ran, not marked known_to_fail, fails or is inconclusive (CI checks the "
                   "defaults this way).")
@click.pass_context
def check(ctx: click.Context, claims_file: str, metrics_file: str, gradients_file: str, runs_dir: str,
          old_runs_dir: str | None, reference_file: str, params_file: str, out: str, count_out: str | None,
          strict: bool) -> None:
    """Verify every finding and check against what is here and record the verdicts.

    A finding depends on training results: over seed means it holds when its whole 95% interval lies on
    the claimed side (paired by seed where variants share their seeds; a tolerance is an equivalence
    test), fails when the interval lies wholly on the other side, and is inconclusive otherwise, with
    about how many seeds would decide it. A check is deterministic arithmetic or an untrained probe. A
    claim that reads a figure published on another corpus is not comparable, and counts for nothing.

    It works on what there is: a claim whose runs params.yaml plans but that have no record yet (an ablation
    added to params.yaml and not trained) is listed as "not run yet" with the command that would run them. A
    fresh clone checks every finding from the committed records, training nothing. The verdicts are then only printed, unless --out
    is given: reports/claims.json keeps the whole run's.

    A claim that fails is a finding, not a broken pipeline: it is listed first, in words, and the
    command exits 0 unless --strict. A claim marked `known_to_fail` (it does not reproduce here, and
    the mark says why) is listed apart and never fails --strict; one that holds again is reported.
    Exit status: 0 the verdicts are recorded; 1 with --strict, an unmarked claim that ran fails or is
    inconclusive; 2 the claims file is malformed or names a run params.yaml does not plan (the pipeline
    is broken, which says nothing about the findings)."""
    from blocklab.analysis.check import BrokenPipeline, check_reports, recorded, show
    from blocklab.json_files import write_json

    try:
        checked = check_reports(claims_file, metrics_file, gradients_file, old_runs_dir or runs_dir, reference_file,
                               params_file)
    except BrokenPipeline as err:
        error = click.ClickException(str(err))
        error.exit_code = 2
        raise error from None
    show(checked)
    explicit = ctx.get_parameter_source("out") is not click.core.ParameterSource.DEFAULT
    if checked.not_run and not explicit:
        click.echo(f"not recorded: {out} keeps the whole run's verdicts (--out FILE records these)")
    else:
        write_json(Path(out), recorded(checked.verdicts), sort_keys=False)
        write_json(Path(count_out) if count_out else Path(out).with_name("claims_count.json"), checked.count,
                   sort_keys=False)
        click.echo(f"verdicts in {out}")
    if checked.failing and strict:
        raise SystemExit(1)


@main.command(short_help="Which findings a change moved, between revisions or experiments.")
@click.argument("a", default="HEAD", required=False)
@click.argument("b", default=None, required=False)
@click.option("--markdown", is_flag=True, help="Print a Markdown report (for $GITHUB_STEP_SUMMARY or a PR comment).")
@click.option("--fail-on-change", is_flag=True, help="Exit 1 when a claim changed verdict (a gate a fork may choose).")
def diff(a: str, b: str | None, markdown: bool, fail_on_change: bool) -> None:
    """Which findings a change moved: the claims whose verdict differs between revision A (default HEAD) and
    B (default the workspace), in words with both verdicts and intervals; then the parameters that differ,
    the variants whose validation loss left A's 95% interval, and the figures that changed. A and B are git
    revisions or DVC experiment names (`dvc exp show` lists them), read through DVC's API.

    \b
    blocklab diff                      HEAD against the workspace (after `dvc repro` or `dvc exp run`)
    blocklab diff main my-experiment   a branch against a DVC experiment
    blocklab diff origin/main HEAD --markdown >> "$GITHUB_STEP_SUMMARY"

    Exit status: 0; 1 with --fail-on-change when a claim changed verdict; 2 when a revision cannot be
    compared (unknown, without reports/claims.json, or a workspace whose reports are out of date)."""
    from blocklab.analysis.diff import DiffError, as_markdown, as_text, compare, read_revision
    from blocklab.tools.pipeline_status import check_reproduced

    try:
        after = read_revision(b)
        if b is None:
            check_reproduced()
        result = compare(read_revision(a), after)
    except DiffError as err:
        click.echo(f"error: {err}", err=True)
        raise SystemExit(2) from None
    click.echo(as_markdown(result) if markdown else as_text(result), nl=not markdown)
    if fail_on_change and result.changed:
        raise SystemExit(1)


@main.command(short_help="Whether this machine computes the committed bits (~15 s).")
@click.option("--committed", default="reports/fingerprint.json", show_default=True,
              type=click.Path(dir_okay=False), help="The digests committed with the results.")
@reports_errors
def fingerprint(committed: str) -> None:
    """Print this machine's numeric family (the CPU, what ATen, MKL and oneDNN compute with, the pins, torch's
    and MKL's versions), train four short runs that use every kind of kernel the plan's runs use (on a fixed
    corpus: no download), print each one's weights digest, and compare them with the digests committed with
    the results.

    Exit status: 0 when this machine computes the committed bits; 1 when not, naming the first difference
    (another numeric family - an ARM Mac, a CPU of another vendor than the results' - says so)."""
    from blocklab.tools.fingerprint import reported

    raise SystemExit(reported(Path(committed), click.echo))


@main.command(short_help="Retrain committed runs from nothing; compare bit for bit.")
@click.option("--run", "run_keys", multiple=True, metavar="RUN",
              help="A run to audit, e.g. placement/post/seed1 (repeat the option for more).")
@former_spelling("--runs", "--run", "old_run_keys", multiple=True)
@click.option("--sample", "sample_size", type=int, default=None, metavar="N",
              help="Audit N runs chosen from HEAD's commit: one of every ablation and map first, each one of the "
                   "cheaper of its runs (default without --run: one per ablation and map).")
@click.option("--encoded", default=str(ENCODED), show_default=True, type=click.Path(file_okay=False),
              help="Encoded corpus (`dvc repro encode`).")
@click.option("--other-family", type=click.Choice(["fail", "skip"]), default="fail", show_default=True,
              help="On a machine of another numeric family than the committed results': exit 1, or 0 (CI's gate).")
@params_option
@reports_errors
def audit(run_keys: tuple[str, ...], old_run_keys: tuple[str, ...], sample_size: int | None, encoded: str,
          other_family: str, params_file: str) -> None:
    """Retrain committed runs from scratch (no run store, no checkpoint) and compare each with its committed
    record in reports/runs/<run>/: every file, byte for byte (metrics, loss curve, per-block diagnostics, the
    weights' digest, the text sample) and its settings. Different commits sample different runs.

    \b
    blocklab audit                               one run of every ablation and map (a few minutes)
    blocklab audit --run placement/post/seed1   that run
    blocklab audit --sample 40

    Exit status: 0 when every audited run reproduces; 1 naming each one that differs and how."""
    from blocklab.tools import audit as audits

    params = load_params(params_file)
    run_keys = tuple(name_today(key) for key in run_keys + old_run_keys)
    runs = audits.named(params, list(run_keys)) if run_keys else []
    if sample_size is not None or not run_keys:
        runs += audits.sample(params, sample_size, audits.commit_of())
    raise SystemExit(audits.reported(list(dict.fromkeys(runs)), Path(encoded), other_family, click.echo))


@main.command(short_help="Log every trained run to MLflow (the pipeline's last stage).")
@click.option("--records", "runs_dir", default=str(RECORDS_DIR), show_default=True,
              type=click.Path(exists=True, file_okay=False),
              help="The runs' records (committed), whose numbers, curves and samples are logged.")
@former_spelling("--runs", "--records", "old_runs_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--weights", "weights_dir", default=str(RUNS_DIR), show_default=True, type=click.Path(file_okay=False),
              help="The train stages' outputs: each variant's seed-0 weights are logged as its model, and each "
                   "run's wall time, where they are on this machine.")
@click.option("--reports", "reports_dir", default="reports", show_default=True,
              type=click.Path(exists=True, file_okay=False), help="Where metrics.json and figures/ are.")
@click.option("--tracking-uri", default=None, help="MLflow store (default: $MLFLOW_TRACKING_URI, else ./mlflow.db).")
@params_option
@reports_errors
def track(runs_dir: str, old_runs_dir: str | None, weights_dir: str, reports_dir: str, tracking_uri: str | None,
          params_file: str) -> None:
    """Log every trained run that MLflow does not have yet (never twice), each variant's seeds nested
    under a parent run holding their means; finish what an interrupted logging left incomplete.

    A store that is unreachable or errors costs no result: a warning names the runs that were not
    logged and the command still succeeds, so the pipeline completes; run it again later."""
    from blocklab.tools.tracking.log_runs import track_reported

    track_reported(load_params(params_file), Path(old_runs_dir or runs_dir), Path(reports_dir), tracking_uri,
                   Path(weights_dir))


@main.command(short_help="MLflow's UI on blocklab's runs, with where to compare them.")
@click.option("--port", default=5000, show_default=True, help="Port on 127.0.0.1.")
@click.option("--tracking-uri", default=None, help="MLflow store (default: $MLFLOW_TRACKING_URI, else ./mlflow.db).")
@click.option("--no-track", is_flag=True,
              help="Serve the store as it is, without first logging what it lacks of this workspace's runs.")
@params_option
def ui(port: int, tracking_uri: str | None, no_track: bool, params_file: str) -> None:
    """Serve the MLflow UI for blocklab's store on 127.0.0.1, and print what the store holds and, for each
    ablation, the addresses of its training runs and of its variants' parent runs compared side by side.

    In a blocklab workspace it first logs what the store lacks of the workspace's runs, as `blocklab track`
    does (after `make demo`, `dvc repro <one stage>` or on a fresh clone, DVC has not run the track stage), and
    each variant's model whose weights have arrived since it was logged.

    The MLflow server runs in a process group of its own. Stopping this command with SIGTERM, SIGINT
    (Ctrl-C) or SIGHUP (sent on as SIGTERM: the server would take SIGHUP for "reload") stops that whole
    group (the server and its workers): whatever the server does with the signal, the command has
    exited, with nothing left running, within 10 s."""
    from blocklab.tools.ui import serve

    if not no_track and Path(params_file).is_file() and RECORDS_DIR.is_dir():
        from blocklab.tools.tracking.log_runs import track_reported

        click.echo("First, what the store lacks of this workspace's runs (blocklab track):")
        track_reported(load_params(params_file), RECORDS_DIR, Path("reports"), tracking_uri, RUNS_DIR)
    raise SystemExit(serve(port, tracking_uri))
