"""The benchmark's parts, on small runs: the lesson's plain loop, the comparison, the FLOP count.
(No timing is asserted: the machines are shared; the benchmark reports ratios.)"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from blocklab.run.job import THREADS
from blocklab.params.schema import RunSpec, load_params
from blocklab.run.settings import ModelConfig, TrainConfig
from blocklab.run.data import Corpus
from blocklab.run.model import planned_flops_per_token
from blocklab.run.threads import torch_threads
from blocklab.run.training import train_run
from blocklab.tools.bench.queue import QUEUE_SWEEP_PARAM, queue_status, queue_sweep_values
from blocklab.tools.bench.trainer import compare_trainers, reference_loop

VOCAB = 65


def _corpus(n: int = 20_000) -> Corpus:
    g = torch.Generator().manual_seed(0)
    return Corpus(chars=[chr(32 + i) for i in range(VOCAB)], train=torch.randint(0, VOCAB, (n,), generator=g),
                  val=torch.randint(0, VOCAB, (n // 10,), generator=g))


def _spec(norm: str, seeds=(0,), steps: int = 30, warmup: int = 0) -> RunSpec:
    return RunSpec(ablation="bench", variant=norm, label=norm, model=ModelConfig(n_layers=2, placement=norm),
                   train=TrainConfig(steps=steps, lr=1e-2, warmup=warmup, eval_interval=10, eval_windows=32),
                   seeds=tuple(seeds))


def test_the_plain_loop_and_the_trainer_give_the_same_training_loss_bit_for_bit():
    # At the trainer's thread count, as every run trains and as the benchmark compares them: at the worker's
    # default count (2 here) MKL may split a product's sums otherwise from one call to the next (CI, 2026-12-06:
    # 4.212366924 against 4.212366848 on one machine, both off the one-thread value).
    corpus = _corpus()
    with torch_threads(THREADS):
        for spec in (_spec("post", warmup=10), _spec("pre")):
            ours = train_run(spec.model, spec.train, 0, corpus.train, corpus.val, VOCAB).metrics["train_loss_last25"]
            assert reference_loop(spec, 0, corpus.train, VOCAB) == ours


def test_the_comparison_reports_each_run_its_ratio_and_equal_results():
    corpus = _corpus()
    figures = compare_trainers([_spec("post", seeds=(0, 1), steps=26)], corpus, echo=lambda _: None)
    assert [row["run"] for row in figures["runs"]] == ["bench/post/seed0", "bench/post/seed1"]
    assert figures["max_abs_difference"] == 0.0  # seeds side by side on one thread each: still bitwise
    assert figures["steps"] == 52
    assert figures["throughput_ratio"] == figures["reference"]["seconds"] / figures["trainer"]["seconds"]
    assert figures["trainer"]["tokens_per_s"] == figures["trainer"]["steps_per_s"] * 32 * 32
    assert figures["matmul_peak_gflops"] > 0
    # the matrix products are some of the kernels every bitwise-equal trainer runs: a looser bound
    assert figures["matrix_products_ceiling_ratio"] > figures["ceiling_ratio"] > 0
    assert figures["kernels"]["step_of"] == "bench/post"


def test_the_comparison_can_show_how_far_rounding_alone_moves_each_result():
    figures = compare_trainers([_spec("post", steps=26)], _corpus(), echo=lambda _: None, rounding=True)
    (row,) = figures["runs"]
    assert row["rounding_difference"] == row["reference_default_threads"] - row["reference"]
    assert figures["max_abs_rounding_difference"] == abs(row["rounding_difference"])


def test_a_models_compute_counts_its_own_matrices_and_its_parameters_without_the_embeddings():
    from blocklab.run.model import build_model, parameter_counts, training_flops_per_token

    d, V = 64, 65
    for cfg in (ModelConfig(), ModelConfig(ffn="swiglu", rope=True, bias=False), ModelConfig(n_layers=2, d_model=32)):
        model = build_model(cfg, V, seed=0)
        counts = parameter_counts(model)
        positions = 0 if cfg.rope else cfg.context * cfg.d_model
        assert counts["non_embedding"] == counts["total"] - V * cfg.d_model - positions
        assert training_flops_per_token(model, cfg.context) == planned_flops_per_token(cfg, V)
    swiglu = ModelConfig(ffn="swiglu")
    hidden = build_model(swiglu, V, seed=0).blocks[0].ffn.w1.out_features
    mlp_matrices, swiglu_matrices = 2 * 4 * d * d, 3 * d * hidden  # what each feed-forward multiplies, per layer
    assert planned_flops_per_token(swiglu, V) - planned_flops_per_token(ModelConfig(), V) == \
        3 * 2 * 6 * (swiglu_matrices - mlp_matrices)


def test_training_flops_per_token_count_the_lessons_matrix_products():
    d, T, V = 64, 32, 65
    per_layer_forward = 2 * (d * 3 * d + d * d) + 2 * 2 * (d * 4 * d) + 2 * 2 * T * d
    assert planned_flops_per_token(ModelConfig(), V) == 3 * (6 * per_layer_forward + 2 * d * V)
    assert planned_flops_per_token(ModelConfig(n_layers=12), V) > planned_flops_per_token(ModelConfig(), V)


def test_each_queue_benchmark_sweeps_new_values_that_change_no_result():
    # Values an earlier sweep used would be restored from DVC's run cache instead of trained.
    first = queue_sweep_values()
    time.sleep(0.01)
    second = queue_sweep_values()
    assert len(set(first) | set(second)) == 8
    ablation, _, knob = QUEUE_SWEEP_PARAM.split(".")[1:]
    assert knob == "checkpoint_every"
    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    steps = {spec.train.steps for spec in params.specs() if spec.ablation == ablation}
    assert all(int(v) > max(steps) for v in first + second)  # no run of that ablation is long enough to checkpoint


def test_queue_status_reads_an_empty_queue_and_says_what_dvc_said_when_it_fails(tmp_path):
    env = {**os.environ}
    (tmp_path / "project").mkdir()
    subprocess.run(["git", "init", "-q"], cwd=tmp_path / "project", check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=tmp_path / "project", check=True)
    assert "No experiment tasks in the queue." in queue_status(env, tmp_path / "project")
    with pytest.raises(RuntimeError, match=r"(?s)attempt 1 of 5\).*not inside of a DVC repository"):
        queue_status(env, tmp_path, pause=0)  # not a torn read: one attempt, DVC's own words


def test_plan_cost_trains_what_differs_reads_what_is_shared_and_counts_a_copied_run_as_free(tmp_path):
    import json
    from dataclasses import replace

    from blocklab.tools.bench.pipeline import plan_cost

    class Plan:  # what plan_cost reads of a Params: its resolved specs
        def __init__(self, *specs):
            self._specs = specs

        def specs(self):
            return list(self._specs)

    same, fewer, more = _spec("pre", steps=12), _spec("post", steps=12), _spec("post", seeds=(0, 1), steps=12)
    twin = replace(more, ablation="other")  # equal settings: the run store copies both its seeds
    timings = tmp_path / "timings.json"
    timings.write_text(json.dumps({"bench/pre/seed0": {"seconds": 4.0}, "other/post/seed0": {"seconds": 3.0}}))
    seen = []
    cost = plan_cost(Plan(same, fewer, replace(fewer, ablation="other")), Plan(same, more, twin), _corpus(), timings,
                     echo=seen.append)
    rows = {row["variant"]: row for row in cost["variants"]}
    assert rows["bench/pre"] == {"variant": "bench/pre", "old_seconds": 4.0, "new_seconds": 4.0, "seeds_copied": 0}
    assert rows["bench/post"]["old_seconds"] > 0 and rows["bench/post"]["new_seconds"] > 0
    assert rows["other/post"]["new_seconds"] == 0.0 and rows["other/post"]["seeds_copied"] == 2
    assert cost["ratio"] == cost["new_seconds"] / cost["old_seconds"]
    assert seen[0].startswith("bench/post: seeds 1 -> 2 (0 copied)")


def test_the_plan_schedule_simulation_places_the_longest_run_first_on_the_first_free_worker():
    from blocklab.tools.bench.schedule import longest_first_makespan, plan_schedule, plan_stage_times

    assert longest_first_makespan([3, 1, 2, 2], 2) == 4  # 3 | 2, then 2 after the 2, then 1 after the 3
    assert longest_first_makespan([3, 1], 8) == 3 and longest_first_makespan([], 4) == 0
    (row,) = plan_schedule({"train@a": [3, 1], "train@b": [2, 2]}, [2])
    assert row == {"workers": 2, "stage_by_stage_seconds": 5, "whole_plan_seconds": 4, "ratio": 1.25,
                   "busy_stage_by_stage": 0.8, "busy_whole_plan": 1.0}
    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    post, w0 = params.spec("placement", "post"), params.spec("warmup", "w0")
    timings = {post.key(0): {"seconds": 9.0}, w0.key(0): {"seconds": 9.0, "reused_from": post.key(0)}}
    assert plan_stage_times(params, timings) == {"train@placement": [9.0]}  # a copied run costs nothing


@pytest.mark.slow
def test_through_dvc_trains_the_ablation_both_ways_in_fresh_clones_with_the_same_metrics(small_project):
    import json

    small_project.run("dvc", "repro", "encode")
    out = small_project.run("blocklab", "bench", "--through-dvc", "--json", "bench.json").stdout
    figures = json.loads((small_project.root / "bench.json").read_text())["through_dvc"]
    variants = list(small_project.params["ablations"]["placement"]["variants"])
    assert figures["targets"] == ["train@placement"]
    runs = 2 * len(variants)
    for way in ("stage_by_stage", "prefetch"):  # fresh clones: every run trained, none copied from a store
        assert figures[way]["runs"] == figures[way]["trained"] == runs
        assert 0 < figures[way]["training_seconds"] and 0 < figures[way]["busy"]
        assert figures["seconds_per_run"][way] == figures[way]["wall_seconds"] / runs
    # busy: the runs' training time as prefetch measured it (one run per worker) over workers x wall
    work = figures["prefetch"]["training_seconds"]
    assert figures["prefetch"]["busy"] == round(work / (figures["workers"] * figures["prefetch"]["wall_seconds"]), 3)
    assert figures["prefetch"]["busy"] <= 1
    assert figures["same_metrics"] is True
    assert figures["ratio"] == round(figures["stage_by_stage"]["wall_seconds"] / figures["prefetch"]["wall_seconds"], 3)
    assert "metrics the same both ways" in out and "seconds a run (4 runs): the lesson's loop" in out
    assert not (small_project.root / "data" / "run_store").exists()  # the clones' stores, not the project's


def test_through_dvc_needs_the_lessons_loop_the_trainer_comparison_times(tmp_path):
    from click.testing import CliRunner

    from blocklab.cli import main

    result = CliRunner().invoke(main, ["bench", "--no-trainer", "--through-dvc", "--encoded", str(tmp_path)])
    assert result.exit_code == 2 and "drop --no-trainer" in result.output
    result = CliRunner().invoke(main, ["bench", "--steps", "10", "--through-dvc", "--encoded", str(tmp_path)])
    assert result.exit_code == 2 and "drop --steps" in result.output


def test_only_what_trains_here_needs_the_encoded_corpus(tmp_path, monkeypatch):
    """`--no-trainer --make-repro` works in fresh clones of its own: it ran into "Directory 'data/encoded' does
    not exist" in a clone that had never encoded the corpus. The trainer comparison still needs it, and says
    what to run."""
    from click.testing import CliRunner

    from blocklab.cli import main

    params = str(Path("params.yaml").resolve())
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["bench", "--no-trainer", "--params", params, "--json", "figures.json"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "figures.json").read_text() == "{}\n"
    result = CliRunner().invoke(main, ["bench", "--params", params])
    assert result.exit_code != 0
    assert "data/encoded does not exist: the trainer comparison trains on it" in result.output
    assert "run `dvc repro encode` first" in result.output


def test_time_left_quality_replays_the_bar_on_the_runs_times_and_fits_its_costs(tmp_path):
    import json

    from blocklab.tools.bench.time_left import time_left_quality
    from blocklab.schedule.plan import COSTS, cost_terms, estimated_seconds

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    specs = [s for s in params.specs() if s.ablation in ("placement", "ladder")]
    clock, runs = 0.0, []
    for spec in specs:  # one worker, each run taking exactly its estimate x 1.5: the bar says 1/1.5 of the time left
        for seed in spec.seeds:
            took = 1.5 * estimated_seconds(spec)
            folder = tmp_path / spec.key(seed)
            folder.mkdir(parents=True)
            (folder / "timing.json").write_text(json.dumps({"seconds": took, "started_at": clock,
                                                            "ended_at": clock + took}))
            clock += took
            runs.append(spec)
    copied = tmp_path / params.spec("warmup", "w0").key(0)  # a copied run is no run the bar waited for
    copied.mkdir(parents=True)
    (copied / "timing.json").write_text(json.dumps({"seconds": 1.0, "started_at": 0, "ended_at": 1,
                                                    "reused_from": "placement/post/seed0"}))
    quality = time_left_quality(params, tmp_path, at=(0.5,))
    assert quality["runs"] == len(runs)
    assert quality["measured_over_estimated"] == {"p10": 1.5, "median": 1.5, "p90": 1.5}
    (row,) = quality["at"]
    assert row["runs_back"] == len(runs) // 2 and row["ratio"] == 1.0  # at the average pace so far: exact
    # the fit recovers costs that explain the times: 1.5 x the constants, up to the terms' collinearity
    fitted = list(quality["fitted"].values())
    for spec in runs:
        assert sum(c * n for c, n in zip(fitted, cost_terms(spec))) == pytest.approx(1.5 * estimated_seconds(spec),
                                                                                        rel=0.05)
    assert len(fitted) == len(COSTS)


def test_the_rotary_benchmark_times_both_sides_of_each_ratio_on_the_plans_blocks():
    """A step of today's block with rotary against the same block with the learned table, and the rotation against
    the attention it rotates: each ratio is the quotient of the two medians measured beside each other."""
    import click

    from blocklab.tools.bench.rotary import measured

    figures = measured("modern_ladder", "peri", "no_rope", _corpus(), "params.yaml", repeats=3)
    steps, parts = figures["step_seconds"], figures["part_seconds"]
    assert set(steps) == {"rotary", "learned"} and set(parts) == {"rotation", "attention"}
    assert min(*steps.values(), *parts.values()) > 0
    assert figures["step_ratio"] == steps["rotary"] / steps["learned"]
    assert figures["rotation_over_attention"] == parts["rotation"] / parts["attention"]
    with pytest.raises(click.UsageError, match="must have rotary positions"):
        measured("modern_ladder", "no_rope", "peri", _corpus(), "params.yaml", repeats=3)


def test_the_rotary_flag_says_how_to_name_its_pair(tmp_path):
    from click.testing import CliRunner

    from blocklab.cli import main

    result = CliRunner().invoke(main, ["bench", "--no-trainer", "--rotary", "modern_ladder/peri"])
    assert result.exit_code == 2
    assert "give ABLATION/WITH,WITHOUT, e.g. modern_ladder/peri,no_rope" in result.output
