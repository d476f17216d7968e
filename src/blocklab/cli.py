"""The `blocklab` command: what a user runs besides `dvc repro`."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path

import click

from blocklab.config import load_params
from blocklab.errors import BlocklabError, reports_errors


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Ablate a character-level Transformer's block: see README.md. The pipeline runs with `dvc repro`."""


@main.command("params")
@click.option("--params", "params_file", default="params.yaml", show_default=True, help="Parameters file.")
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


@main.command()
@click.option("--ablation", default="norm_order", show_default=True, help="Whose runs to benchmark.")
@click.option("--steps", type=int, default=None, help="Override the steps of every run (shorter benchmark).")
@click.option("--encoded", default="data/encoded", show_default=True, type=click.Path(exists=True, file_okay=False),
              help="Encoded corpus (made by `dvc repro encode`).")
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
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="Also write the figures here.")
@click.option("--params", "params_file", default="params.yaml", show_default=True, help="Parameters file.")
@reports_errors
def bench(ablation: str, steps: int | None, encoded: str, trainer: bool, rounding: bool, pipeline: bool,
          queue: bool, old_params: str | None, json_out: str | None, params_file: str) -> None:
    """Trainer vs the lesson's plain loop on the same runs: throughput ratio, equal results, GFLOP/s, and the
    ceiling on the ratio for bitwise-equal results (one step's kernels at one thread, by kind); with
    --rounding, --pipeline and --queue, how far rounding alone moves results, the pipeline's overhead and a
    queued sweep's speed-up too. Prints ratios: every comparison is measured within one run, because the
    machines are shared and noisy."""
    import json

    from blocklab.bench import QUEUE_SWEEP_PARAM, pipeline_overhead, queue_sweep_values, queue_speedup

    figures: dict = {}
    if trainer:
        figures.update(_bench_trainer(ablation, steps, encoded, params_file, rounding))
    if pipeline:
        overhead = pipeline_overhead(Path("reports/timings.json"))
        figures["pipeline"] = overhead
        click.echo(
            f"\nfull dvc repro: {overhead['wall_seconds']:.0f} s wall, {overhead['training_seconds']:.0f} s training "
            f"-> overhead {overhead['overhead_share']:.0%}; no-op dvc repro {overhead['noop_repro_seconds']:.1f} s"
        )
    if queue:
        param, values = QUEUE_SWEEP_PARAM, queue_sweep_values()
        click.echo(f"\nqueued sweep over {param} = {', '.join(values)}")
        sweep = figures["queue"] = queue_speedup(param, values, echo=click.echo)
        click.echo(f"dvc queue start -j 2 vs -j 1: {sweep['speedup']:.2f}x")
    if old_params:
        from blocklab.bench import plan_cost
        from blocklab.data import load_corpus

        click.echo(f"\ntraining time of the plan in {params_file} against {old_params}")
        cost = figures["plan"] = plan_cost(load_params(old_params), load_params(params_file), load_corpus(encoded),
                                           Path("reports/timings.json"), echo=click.echo)
        click.echo(f"training, every train stage one after the other: {cost['old_seconds']:.0f} s -> "
                   f"{cost['new_seconds']:.0f} s = {cost['ratio']:.2f}x")
    if json_out:
        Path(json_out).write_text(json.dumps(figures, indent=2) + "\n")


def _bench_trainer(ablation: str, steps: int | None, encoded: str, params_file: str, rounding: bool) -> dict:
    from dataclasses import replace

    from blocklab.bench import compare_trainers
    from blocklab.data import load_corpus

    specs = [s for s in load_params(params_file).specs() if s.ablation == ablation]
    if not specs:
        raise click.BadParameter(f"no ablation '{ablation}' in {params_file}", param_hint="--ablation")
    if steps is not None:
        specs = [replace(s, train=replace(s.train, steps=steps)) for s in specs]
    corpus = load_corpus(encoded)
    click.echo(f"benchmarking {ablation}: {sum(len(s.seeds) for s in specs)} runs, trainer and reference loop")
    figures = compare_trainers(specs, corpus, echo=click.echo, rounding=rounding)
    t, r = figures["trainer"], figures["reference"]
    click.echo(
        f"\n{'':22}{'steps/s':>10}{'tokens/s':>12}{'GFLOP/s':>10}\n"
        f"{'reference loop':22}{r['steps_per_s']:>10.1f}{r['tokens_per_s']:>12,.0f}{r['gflops']:>10.1f}\n"
        f"{'blocklab trainer':22}{t['steps_per_s']:>10.1f}{t['tokens_per_s']:>12,.0f}{t['gflops']:>10.1f}\n"
        f"{'fp32 matmul peak':22}{'':>10}{'':>12}{figures['matmul_peak_gflops']:>10.1f}\n\n"
        f"throughput ratio trainer / reference: {figures['throughput_ratio']:.2f}x\n"
        f"  ceiling with bitwise-equal results: {figures['ceiling_ratio']:.2f}x; matrix products alone: "
        f"{figures['matrix_products_ceiling_ratio']:.2f}x\n"
        f"largest |difference| in train_loss_last25: {figures['max_abs_difference']:.4f} "
        f"({'equal within 0.01' if figures['max_abs_difference'] <= 0.01 else 'NOT equal within 0.01'})"
    )
    if rounding:
        click.echo(f"largest |difference| the reference loop's own rounding makes ({figures['threads']} threads vs "
                   f"one): {figures['max_abs_rounding_difference']:.4f}")
    kernels = figures["kernels"]["step_ms_by_kind"]
    click.echo(f"\none step of {figures['kernels']['step_of']} at one thread, its kernels replayed by kind "
               f"({sum(kernels.values()):.1f} ms):")
    for kind, ms in kernels.items():
        click.echo(f"  {kind:18}{ms:>7.1f} ms")
    return figures


@main.command()
@click.argument("run")
@click.option("--prompt", default="\n", show_default="a newline", help="Text the samples start from.")
@click.option("--tokens", default=500, show_default=True, type=int, help="Characters to generate per sample.")
@click.option("--temperature", default=0.8, show_default=True, type=float, help="Divides the logits (> 0).")
@click.option("--top-k", default=200, show_default=True, type=int, help="Sample among the k likeliest characters.")
@click.option("--seed", default=1337, show_default=True, type=int, help="Seed of the sampling generator.")
@click.option("--num-samples", default=1, show_default=True, type=int, help="How many samples.")
@click.option("--runs", "runs_dir", default="data/runs", show_default=True, type=click.Path(file_okay=False),
              help="Trained runs (DVC outputs).")
@click.option("--params", "params_file", default="params.yaml", show_default=True, help="Parameters file.")
@reports_errors
def sample(run: str, prompt: str, tokens: int, temperature: float, top_k: int, seed: int, num_samples: int,
           runs_dir: str, params_file: str) -> None:
    """Generate text from a trained run, RUN = <ablation>/<variant>[/seed<k>] (default: the ablation's first
    seed), as nanoGPT's sample.py does and with its defaults: the context cropped to the model's, logits over
    the temperature, top-k, multinomial. The same seed gives the same text."""
    from blocklab.sampling import SampleSettings, run_directory, sample_run

    settings = SampleSettings(prompt=prompt, tokens=tokens, temperature=temperature, top_k=top_k, seed=seed,
                              num_samples=num_samples)
    directory = run_directory(load_params(params_file), Path(runs_dir), run)
    for i, text in enumerate(sample_run(directory, settings)):
        if i:
            click.echo("---------------")
        click.echo(text)


@main.command()
@click.option("--claims", "claims_file", default="claims.yaml", show_default=True, type=click.Path(dir_okay=False),
              help="The claims to verify.")
@click.option("--metrics", "metrics_file", default="reports/metrics.json", show_default=True,
              type=click.Path(dir_okay=False), help="Metrics written by the `evaluate` stage.")
@click.option("--gradients", "gradients_file", default="reports/gradients.json", show_default=True,
              type=click.Path(dir_okay=False), help="Written by the `gradients` stage.")
@click.option("--runs", "runs_dir", default="data/runs", show_default=True, type=click.Path(file_okay=False),
              help="Trained runs, whose curves window(...) and at(...) read.")
@click.option("--reference", "reference_file", default="reference.yaml", show_default=True,
              type=click.Path(dir_okay=False), help="The published figures, with the corpus each was published on.")
@click.option("--params", "params_file", default="params.yaml", show_default=True, type=click.Path(dir_okay=False),
              help="Parameters file (its data.sha256 names the corpus this run trained on).")
@click.option("--out", default="reports/claims.json", show_default=True, type=click.Path(dir_okay=False),
              help="Where to write the verdicts.")
@click.option("--count-out", default=None, type=click.Path(dir_okay=False),
              help="Where to write how many findings hold and checks are exact, a DVC metric  "
                   "[default: claims_count.json beside --out]")
@click.option("--strict", is_flag=True,
              help="Exit 1 when a claim not marked known_to_fail fails or is inconclusive (CI checks the defaults "
                   "this way).")
@reports_errors
def check(claims_file: str, metrics_file: str, gradients_file: str, runs_dir: str, reference_file: str,
          params_file: str, out: str, count_out: str | None, strict: bool) -> None:
    """Verify every finding and check against this run's reports and record the verdicts.

    A finding depends on training results: over seed means it holds when its whole 95% interval lies on
    the claimed side (paired by seed where variants share their seeds; a tolerance is an equivalence
    test), fails when the interval lies wholly on the other side, and is inconclusive otherwise, with
    about how many seeds would decide it. A check is deterministic arithmetic or an untrained probe. A
    claim that reads a figure published on another corpus is not comparable, and counts for nothing.

    A claim that fails is a finding, not a broken pipeline: it is listed first, in words, and the
    command exits 0 unless --strict. A claim marked `known_to_fail` (it does not reproduce here, and
    the mark says why) is listed apart and never fails --strict; one that holds again is reported.
    Exit status: 0 the verdicts are recorded; 1 with --strict, an unmarked claim fails or is
    inconclusive; 2 the reports lack a run or value a claim needs, or the claims file is malformed (the
    pipeline is broken, which says nothing about the findings)."""
    import json
    import textwrap

    from blocklab.claims import (
        MissingResult, Reports, check_claims, claims_count, count_in_words, failing_in_words, load_claims,
        marked_in_words,
    )
    from blocklab.config import load_params
    from blocklab.maps import lr_groups
    from blocklab.reference import load_reference
    from blocklab.results import write_json

    def broken(message: str) -> click.ClickException:
        error = click.ClickException(message)
        error.exit_code = 2
        return error

    try:
        claims = load_claims(claims_file)
        reference = load_reference(reference_file)
        params = load_params(params_file) if Path(params_file).exists() else None
        corpus = None if params is None else params.data.sha256
        groups = {} if params is None else lr_groups(params)
    except BlocklabError as err:
        raise broken(str(err)) from None
    files = {}
    for name, path in (("metrics", metrics_file), ("gradients", gradients_file)):
        if not Path(path).exists():
            raise broken(f"{path} does not exist: run `dvc repro` first")
        files[name] = json.loads(Path(path).read_text())
    try:
        verdicts = check_claims(claims, Reports(files["metrics"], files["gradients"], reference, corpus,
                                                Path(runs_dir) if Path(runs_dir).is_dir() else None, groups))
    except MissingResult as err:
        raise broken(f"cannot check the claims, the pipeline's reports are incomplete: {err}") from None
    except BlocklabError as err:  # an expression that cannot be evaluated: the claims file is malformed
        raise broken(str(err)) from None
    write_json(Path(out), {k: {f: v for f, v in verdict.items() if f != "claim"} for k, verdict in verdicts.items()},
               sort_keys=False)
    count = claims_count(verdicts)
    write_json(Path(count_out) if count_out else Path(out).with_name("claims_count.json"), count, sort_keys=False)
    failing = failing_in_words(claims, verdicts)
    known, now_hold = marked_in_words(claims, verdicts)
    for lines, heading, colour in (
            (failing, f"{len(failing)} claims fail or are inconclusive:", "red"),
            (known, f"{len(known)} claims marked known_to_fail do not hold, as expected:", "yellow"),
            (now_hold, f"{len(now_hold)} claims marked known_to_fail now hold (remove the mark?):", "yellow")):
        if lines:
            click.secho(heading, fg=colour, bold=True)
            for line in lines:
                click.echo(f"  - {line}")
            click.echo()
    width = max(len(k) for k in verdicts)
    styles = {"holds": {"fg": "green"}, "fails": {"fg": "red", "bold": True},
              "inconclusive": {"fg": "yellow", "bold": True}, "not comparable": {"fg": "blue"}}
    click.echo(f"{'id':<{width}}  {'kind':<7}  {'verdict':<14}  {'measured':<28}  {'expected':<24}  "
               f"{'interval':<22}  claim")
    for cid, v in verdicts.items():
        verdict = click.style(f"{v['verdict']:<14}", **styles[v["verdict"]])
        interval = "" if v["interval"] is None else str(v["interval"])
        claim = textwrap.shorten(v["claim"], 80)
        click.echo(f"{cid:<{width}}  {v['kind']:<7}  {verdict}  {str(v['measured']):<28.28}  "
                   f"{str(v['expected']):<24.24}  {interval:<22.22}  {claim}")
    click.echo(f"\n{count_in_words(count)}; verdicts in {out}")
    if failing and strict:
        raise SystemExit(1)


@main.command()
@click.option("--runs", "runs_dir", default="data/runs", show_default=True,
              type=click.Path(exists=True, file_okay=False), help="Trained runs (DVC outputs).")
@click.option("--reports", "reports_dir", default="reports", show_default=True,
              type=click.Path(exists=True, file_okay=False), help="Where metrics.json and figures/ are.")
@click.option("--tracking-uri", default=None, help="MLflow store (default: $MLFLOW_TRACKING_URI, else ./mlflow.db).")
@click.option("--params", "params_file", default="params.yaml", show_default=True, help="Parameters file.")
@reports_errors
def track(runs_dir: str, reports_dir: str, tracking_uri: str | None, params_file: str) -> None:
    """Log every trained run that MLflow does not have yet (never twice), each variant's seeds nested
    under a parent run holding their means; finish what an interrupted logging left incomplete.

    A store that is unreachable or errors costs no result: a warning names the runs that were not
    logged and the command still succeeds, so the pipeline completes; run it again later."""
    import json
    import time

    from blocklab.tracking import track as track_runs

    started = time.perf_counter()
    params = load_params(params_file)
    baselines = json.loads((Path(reports_dir) / "metrics.json").read_text())["baselines"]
    result = track_runs(params, Path(runs_dir), baselines, Path(reports_dir) / "figures", uri=tracking_uri)
    logged, failed = result["logged"], result["failed"]
    click.echo(f"MLflow ({result['uri']}): {len(logged)} runs logged, {result['already']} already there; "
               f"{result['variants']} variant parent runs logged")
    if result["log_seconds"]:
        logging, training = sum(result["log_seconds"].values()), sum(result["train_seconds"].values())
        whole = time.perf_counter() - started
        click.echo(f"logging took {logging:.1f} s ({whole:.1f} s with the parent runs, their models and samples): "
                   f"{logging / training:.1%} ({whole / training:.1%}) of those runs' {training:.0f} s of training")
    if failed:
        reasons = "; ".join(sorted(set(failed.values())))
        click.secho(f"warning: {len(failed)} runs were NOT logged to MLflow ({reasons}): {', '.join(sorted(failed))}. "
                    f"Their results are safe in {runs_dir}; run `blocklab track` when the store is back.",
                    fg="yellow", err=True)


@main.command()
@click.option("--port", default=5000, show_default=True, help="Port on 127.0.0.1.")
@click.option("--tracking-uri", default=None, help="MLflow store (default: $MLFLOW_TRACKING_URI, else ./mlflow.db).")
def ui(port: int, tracking_uri: str | None) -> None:
    """Serve the MLflow UI for blocklab's store on 127.0.0.1.

    The MLflow server runs in a process group of its own. Stopping this command with SIGTERM, SIGINT
    (Ctrl-C) or SIGHUP forwards the signal to that whole group (the server and its workers) and waits
    for it; a member still running 10 s later is killed. Nothing outlives the command."""
    import shutil
    import signal
    import subprocess
    import sys

    from blocklab.processes import stop_group
    from blocklab.tracking import ensure_store, tracking_uri as default_uri

    uri = tracking_uri or default_uri()
    ensure_store(uri)
    mlflow = shutil.which("mlflow") or str(Path(sys.executable).with_name("mlflow"))
    click.echo(f"MLflow UI for {uri}: http://127.0.0.1:{port}  (Ctrl-C to stop)")
    server = subprocess.Popen([mlflow, "ui", "--backend-store-uri", uri, "--host", "127.0.0.1", "--port", str(port)],
                              start_new_session=True)

    def forward(signum, _frame) -> None:
        try:
            os.killpg(server.pid, signum)
        except ProcessLookupError:
            pass

    for stopping in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(stopping, forward)
    try:
        code = server.wait()
    finally:
        stop_group(server.pid)
    raise SystemExit(code)
