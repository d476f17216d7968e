"""The `blocklab` command: what a user runs besides `dvc repro`."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import click

from blocklab.errors import reports_errors
from blocklab.options import params_option
from blocklab.schedule.stages import ENCODED, RUNS_DIR, STORE_DIR
from blocklab.run.config import load_params



# How `blocklab --help` groups the commands: what a user runs, then what a developer of blocklab runs.
SECTIONS = {"Try it": ["demo"],
            "Run the plan": ["prefetch", "params", "store"],
            "Look at the results": ["check", "diff", "sample", "track", "ui"],
            "Check the bits": ["fingerprint", "audit"],
            "For blocklab's developers": ["bench", "docs"]}


class SectionedGroup(click.Group):
    """A group whose help lists its commands under SECTIONS' headings, in their order."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = max(map(len, self.commands))  # one column width in every section
        sections = {**SECTIONS, "Other commands": sorted(set(self.commands) - {n for ns in SECTIONS.values() for n in ns})}
        for heading, names_in in sections.items():
            rows = [(name.ljust(names), self.commands[name].get_short_help_str(formatter.width - 6 - names))
                    for name in names_in if name in self.commands]
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
    for spec in params.specs() + params.map_specs():
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

    prefetch_reported(load_params(params_file), targets, workers, scheduler, dry_run, store_dir)


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


@main.command(short_help="The trainer against the lesson's loop; the pipeline's costs.")
@click.option("--ablation", default="norm_order", show_default=True, help="Whose runs to benchmark.")
@click.option("--steps", type=int, default=None, help="Override the steps of every run (shorter benchmark).")
@click.option("--encoded", default=str(ENCODED), show_default=True, type=click.Path(file_okay=False),
              help="Encoded corpus (made by `dvc repro encode`), for the trainer comparison and --plan-against.")
@click.option("--trainer/--no-trainer", default=True, show_default=True,
              help="Compare the trainer with the lesson's plain loop (--no-trainer: only what the flags below ask).")
@click.option("--rounding", is_flag=True,
              help="Also run the plain loop with torch's default thread count: how far a change of rounding alone "
                   "moves each result.")
@click.option("--pipeline", is_flag=True, help="Also force a full `dvc repro` and measure the pipeline's overhead.")
@click.option("--queue", is_flag=True,
              help="Also time a small sweep through `dvc exp run --queue` with `dvc queue start -j 1` and `-j 2`.")
@click.option("--plan-against", "old_params", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Also compare the training time of this params file's plan with --params's: the variants that "
                   "differ train under both, alternating (e.g. --plan-against <(git show HEAD~1:params.yaml)).")
@click.option("--plan-schedule", is_flag=True,
              help="Also simulate, from the plan's measured run times (reports/timings.json), its training on "
                   "clusters of --workers workers: stage by stage (dvc repro) against all at once (blocklab prefetch).")
@click.option("--workers", default="2,8,32,128", show_default=True, metavar="N,N,...",
              help="The cluster sizes --plan-schedule simulates.")
@click.option("--time-left", "time_left", is_flag=True,
              help="Also tell how well the last `blocklab prefetch` told the time left, from its runs' times in "
                   "data/runs (every run trained by it, from an empty store), and fit the estimate's costs to them.")
@click.option("--through-dvc", "through_dvc", is_flag=True,
              help="Also train the ablation's runs through DVC from fresh clones of HEAD, both ways (`dvc repro` stage by "
                   "stage; `blocklab prefetch` and `dvc repro`): seconds per run, start-up included, against the "
                   "lesson's loop.")
@click.option("--make-repro", "make_repro", is_flag=True,
              help="Also reproduce the whole default plan from nothing twice, in two fresh clones of HEAD: `dvc repro` stage by "
                   "stage, then `blocklab prefetch` and `dvc repro` (an hour or more on two cores).")
@click.option("--dask-workers", type=int, default=0, show_default=True,
              help="With --make-repro or --through-dvc: train both ways on a local Dask cluster of this many one-thread "
                   "workers.")
@click.option("--numerics", is_flag=True,
              help="Also time one run of the ablation (its first variant, seed 0) on every numeric path - unpinned, "
                   "each pin alone, blocklab's pins, MKL's COMPATIBLE branch - in fresh processes, 3 times each.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="Also write the figures here.")
@params_option
@reports_errors
def bench(ablation: str, steps: int | None, encoded: str, trainer: bool, rounding: bool, pipeline: bool,
          queue: bool, old_params: str | None, plan_schedule: bool, workers: str, time_left: bool, through_dvc: bool,
          make_repro: bool, dask_workers: int, numerics: bool, json_out: str | None, params_file: str) -> None:
    """Trainer vs the lesson's plain loop on the same runs: throughput ratio, equal results, GFLOP/s, and the
    ceiling on the ratio for bitwise-equal results (one step's kernels at one thread, by kind); with
    --rounding, --pipeline and --queue, how far rounding alone moves results, the pipeline's overhead and a
    queued sweep's speed-up too; with --through-dvc, --make-repro, --plan-schedule and --time-left, training
    through DVC stage by stage against `blocklab prefetch` (an ablation, the whole plan, simulated clusters)
    and how well prefetch's bar told the time left. Prints ratios: every comparison is measured within one
    run, because the machines are shared and noisy."""
    import json

    from blocklab.tools.bench import both_ways as both_ways_bench
    from blocklab.tools.bench import numerics as numerics_bench
    from blocklab.tools.bench import pipeline as pipeline_bench
    from blocklab.tools.bench import queue as queue_bench
    from blocklab.tools.bench import schedule as schedule_bench
    from blocklab.tools.bench import time_left as time_left_bench
    from blocklab.tools.bench import trainer as trainer_bench

    if through_dvc and not trainer:
        raise click.UsageError("--through-dvc compares with the lesson's loop, which the trainer comparison times: "
                               "drop --no-trainer")
    if through_dvc and steps is not None:
        raise click.UsageError("--through-dvc trains the runs as params.yaml sets them, and the lesson's loop must "
                               "train the same: drop --steps")
    figures: dict = {}
    if trainer:
        figures.update(trainer_bench.shown(ablation, steps, encoded, params_file, rounding))
    if pipeline:
        figures["pipeline"] = pipeline_bench.shown_overhead()
    if queue:
        figures["queue"] = queue_bench.shown()
    if old_params:
        figures["plan"] = pipeline_bench.shown_plan_cost(old_params, params_file, encoded)
    if plan_schedule:
        figures["plan_schedule"] = schedule_bench.shown(params_file, workers)
    if time_left:
        figures["time_left"] = time_left_bench.shown(params_file)
    if through_dvc:
        figures["through_dvc"] = both_ways_bench.shown_per_run(ablation, params_file, dask_workers, figures["reference"])
    if numerics:
        variant = next(iter(load_params(params_file).ablations[ablation].variants))
        figures["numerics"] = numerics_bench.shown(ablation, variant, 0, steps, encoded, params_file, repeats=3)
    if make_repro:
        click.echo("\nthe whole default plan from nothing, both ways")
        figures["make_repro"] = both_ways_bench.shown((), dask_workers)
    if json_out:
        Path(json_out).write_text(json.dumps(figures, indent=2) + "\n")


@main.command(short_help="Write the README's and docs' results from reports/ (--check).")
@click.option("--check", "check_only", is_flag=True, help="Write nothing; exit 1 naming the documents whose generated "
                                                         "blocks differ from what reports/ says.")
@click.option("--walkthrough", is_flag=True, help="First capture the README walk-through's outputs anew: run its "
                                                  "experiment in this workspace (reproduced, committed, clean), "
                                                  "record what its commands print, then restore the workspace.")
def docs(check_only: bool, walkthrough: bool) -> None:
    """The numbers of README.md and docs/*.md that the pipeline produces live in generated blocks
    (`<!-- generated: KIND ARGS -->` ... `<!-- end: KIND -->`), written from the committed reports: the
    findings' verdicts, measured values and intervals, their count, the claims marked known to fail, samples,
    and the walk-through's real outputs (docs/walkthrough/). Run it after `make repro` and commit with the
    reports; CI runs --check."""
    from blocklab.tools.docs import capture_walkthrough, stale, write

    root = Path.cwd()
    if check_only:
        found = stale(root)
        if found:
            click.echo(f"{', '.join(found)}: generated blocks differ from reports/ (run `blocklab docs`)", err=True)
            raise SystemExit(1)
        click.echo("every generated block matches reports/")
        return
    if walkthrough:
        capture_walkthrough(root, echo=click.echo)
    changed = write(root)
    click.echo(f"rewrote {', '.join(changed)}" if changed else "every generated block already matches reports/")


@main.command(short_help="Generate text from a trained run, as nanoGPT's sample.py does.")
@click.argument("run")
@click.option("--prompt", default="\n", show_default="a newline", help="Text the samples start from.")
@click.option("--tokens", default=500, show_default=True, type=int, help="Characters to generate per sample.")
@click.option("--temperature", default=0.8, show_default=True, type=float, help="Divides the logits (> 0).")
@click.option("--top-k", default=200, show_default=True, type=int, help="Sample among the k likeliest characters.")
@click.option("--seed", default=1337, show_default=True, type=int, help="Seed of the sampling generator.")
@click.option("--num-samples", default=1, show_default=True, type=int, help="How many samples.")
@click.option("--runs", "runs_dir", default=str(RUNS_DIR), show_default=True, type=click.Path(file_okay=False),
              help="Trained runs (DVC outputs).")
@params_option
@reports_errors
def sample(run: str, prompt: str, tokens: int, temperature: float, top_k: int, seed: int, num_samples: int,
           runs_dir: str, params_file: str) -> None:
    """Generate text from a trained run, RUN = <ablation>/<variant>[/seed<k>] (default: the ablation's first
    seed), as nanoGPT's sample.py does and with its defaults: the context cropped to the model's, logits over
    the temperature, top-k, multinomial. The same seed gives the same text."""
    from blocklab.tools.sampling import SampleSettings, run_directory, sample_run

    settings = SampleSettings(prompt=prompt, tokens=tokens, temperature=temperature, top_k=top_k, seed=seed,
                              num_samples=num_samples)
    directory = run_directory(load_params(params_file), Path(runs_dir), run)
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
@click.option("--runs", "runs_dir", default=str(RUNS_DIR), show_default=True, type=click.Path(file_okay=False),
              help="Trained runs, whose curves window(...) and at(...) read.")
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
          reference_file: str, params_file: str, out: str, count_out: str | None, strict: bool) -> None:
    """Verify every finding and check against what is here and record the verdicts.

    A finding depends on training results: over seed means it holds when its whole 95% interval lies on
    the claimed side (paired by seed where variants share their seeds; a tolerance is an equivalence
    test), fails when the interval lies wholly on the other side, and is inconclusive otherwise, with
    about how many seeds would decide it. A check is deterministic arithmetic or an untrained probe. A
    claim that reads a figure published on another corpus is not comparable, and counts for nothing.

    It works on what there is: a claim whose runs params.yaml plans but that have not run here (a fresh
    clone has the committed reports, not the runs' curves; `make demo` trains two ablations) is listed as
    "not run yet" with the command that would run them. The verdicts are then only printed, unless --out
    is given: reports/claims.json keeps the whole run's.

    A claim that fails is a finding, not a broken pipeline: it is listed first, in words, and the
    command exits 0 unless --strict. A claim marked `known_to_fail` (it does not reproduce here, and
    the mark says why) is listed apart and never fails --strict; one that holds again is reported.
    Exit status: 0 the verdicts are recorded; 1 with --strict, an unmarked claim that ran fails or is
    inconclusive; 2 the claims file is malformed or names a run params.yaml does not plan (the pipeline
    is broken, which says nothing about the findings)."""
    from blocklab.analysis.check import BrokenPipeline, check_reports, recorded, show
    from blocklab.run.results import write_json

    try:
        checked = check_reports(claims_file, metrics_file, gradients_file, runs_dir, reference_file, params_file)
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
    from blocklab.analysis.diff import DiffError, as_markdown, as_text, check_reproduced, compare, read_revision

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
@click.option("--runs", "run_keys", multiple=True, metavar="RUN",
              help="A run key to audit, e.g. norm_order/post/seed1 (repeat the option for more).")
@click.option("--sample", "sample_size", type=int, default=None, metavar="N",
              help="Audit N runs chosen from HEAD's commit: one of every ablation and map first, each one of the "
                   "cheaper of its runs (default without --runs: one per ablation and map).")
@click.option("--encoded", default=str(ENCODED), show_default=True, type=click.Path(file_okay=False),
              help="Encoded corpus (`dvc repro encode`).")
@click.option("--other-family", type=click.Choice(["fail", "skip"]), default="fail", show_default=True,
              help="On a machine of another numeric family than the committed results': exit 1, or 0 (CI's gate).")
@params_option
@reports_errors
def audit(run_keys: tuple[str, ...], sample_size: int | None, encoded: str, other_family: str,
          params_file: str) -> None:
    """Retrain committed runs from scratch (no run store, no checkpoint) and compare each with what the
    commit records of it: every figure in reports/metrics.json, exactly, and its weights' digest in
    reports/weights.json. Different commits sample different runs.

    \b
    blocklab audit                               one run of every ablation and map (a few minutes)
    blocklab audit --runs norm_order/post/seed1  that run
    blocklab audit --sample 40

    Exit status: 0 when every audited run reproduces; 1 naming each one that differs and how."""
    from blocklab.tools import audit as audits

    params = load_params(params_file)
    runs = audits.named(params, list(run_keys)) if run_keys else []
    if sample_size is not None or not run_keys:
        runs += audits.sample(params, sample_size, audits.commit_of())
    raise SystemExit(audits.reported(list(dict.fromkeys(runs)), Path(encoded), other_family, click.echo))


@main.command(short_help="Log every trained run to MLflow (the pipeline's last stage).")
@click.option("--runs", "runs_dir", default=str(RUNS_DIR), show_default=True,
              type=click.Path(exists=True, file_okay=False), help="Trained runs (DVC outputs).")
@click.option("--reports", "reports_dir", default="reports", show_default=True,
              type=click.Path(exists=True, file_okay=False), help="Where metrics.json and figures/ are.")
@click.option("--tracking-uri", default=None, help="MLflow store (default: $MLFLOW_TRACKING_URI, else ./mlflow.db).")
@params_option
@reports_errors
def track(runs_dir: str, reports_dir: str, tracking_uri: str | None, params_file: str) -> None:
    """Log every trained run that MLflow does not have yet (never twice), each variant's seeds nested
    under a parent run holding their means; finish what an interrupted logging left incomplete.

    A store that is unreachable or errors costs no result: a warning names the runs that were not
    logged and the command still succeeds, so the pipeline completes; run it again later."""
    from blocklab.tools.tracking.log_runs import track_reported

    track_reported(load_params(params_file), Path(runs_dir), Path(reports_dir), tracking_uri)


@main.command(short_help="MLflow's UI on blocklab's runs, with where to compare them.")
@click.option("--port", default=5000, show_default=True, help="Port on 127.0.0.1.")
@click.option("--tracking-uri", default=None, help="MLflow store (default: $MLFLOW_TRACKING_URI, else ./mlflow.db).")
def ui(port: int, tracking_uri: str | None) -> None:
    """Serve the MLflow UI for blocklab's store on 127.0.0.1, and print, for each ablation, the addresses of
    its training runs and of its variants' parent runs compared side by side.

    The MLflow server runs in a process group of its own. Stopping this command with SIGTERM, SIGINT
    (Ctrl-C) or SIGHUP (sent on as SIGTERM: the server would take SIGHUP for "reload") stops that whole
    group (the server and its workers): whatever the server does with the signal, the command has
    exited, with nothing left running, within 10 s."""
    from blocklab.tools.ui import serve

    raise SystemExit(serve(port, tracking_uri))
