"""`blocklab sample` and the samples of the report: what a trained model writes, from its saved weights."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from blocklab.cli import main
from blocklab.params.schema import load_params
from blocklab.run.data import load_corpus
from blocklab.records import read_metrics
from blocklab.run.results import MODEL_FILE
from blocklab.run.training import evaluate_loss, validation_windows
from blocklab.tools.sampling import read_model

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def project(reproduced_project):
    return reproduced_project


def sample(project, *args):
    return CliRunner().invoke(main, ["sample", *args, "--weights", str(project.root / "data/runs"),
                                     "--params", str(project.root / "params.yaml")])


def test_every_run_keeps_its_weights_and_they_rebuild_its_exact_validation_loss(project):
    run = project.root / "data/runs/placement/pre/seed0"
    assert (run / MODEL_FILE).exists()
    model, cfg, chars = read_model(run)
    corpus = load_corpus(project.root / "data/encoded")
    assert chars == corpus.chars
    train_cfg = load_params(project.root / "params.yaml").spec("placement", "pre").train
    x, y = validation_windows(corpus.val, cfg.context, train_cfg.eval_windows)
    assert evaluate_loss(model, x, y) == read_metrics(run)["val_loss"]


def test_a_seed_gives_the_same_text_twice_and_another_seed_another_text(project):
    first = sample(project, "placement/pre", "--tokens", "80")
    again = sample(project, "placement/pre", "--tokens", "80")
    other = sample(project, "placement/pre", "--tokens", "80", "--seed", "7")
    assert first.exit_code == 0, first.output
    assert first.output == again.output != other.output
    assert first.output.startswith("\n") and len(first.output.rstrip("\n")) >= 70


def test_a_prompt_longer_than_the_context_is_cropped_and_the_samples_are_separated_as_nanogpt_does(project):
    context = project.params["defaults"]["model"]["context"]
    prompt = ("the cat sat on a mat and " * 4)[: context * 3]
    result = sample(project, "placement/pre/seed1", "--prompt", prompt, "--tokens", "20", "--num-samples", "2")
    assert result.exit_code == 0, result.output
    texts = result.output.rstrip("\n").split("\n---------------\n")
    assert len(texts) == 2 and all(t.startswith(prompt) and len(t) == len(prompt) + 20 for t in texts)


@pytest.mark.parametrize("args, message", [
    (["placement/prex"], "unknown variant of ablation 'placement' 'prex'"),
    (["placment/pre"], "did you mean 'placement'?"),
    (["placement/pre/seed9"], "its seeds are seed0, seed1"),
    (["placement"], "name it <ablation>/<variant>"),
    (["placement/pre", "--prompt", "Zebra\u00a7"], "characters this model never saw: 'Z', '\u00a7'"),
    (["placement/pre", "--temperature", "0"], "--temperature must be positive"),
    (["placement/pre", "--top-k", "0"], "--top-k must be a positive number"),
])
def test_a_mistake_says_what_to_do(project, args, message):
    result = sample(project, *args)
    assert result.exit_code == 1 and message in result.output, result.output


def test_a_run_whose_weights_are_not_here_says_where_its_record_is_and_how_to_get_them(project, tmp_path):
    result = CliRunner().invoke(main, ["sample", "placement/pre", "--weights", str(tmp_path),
                                       "--params", str(project.root / "params.yaml")])
    words = " ".join(result.output.split())
    assert result.exit_code == 1 and "placement/pre/seed0's weights are not on this machine" in words, words
    for way in ("reports/runs/placement/pre/seed0/", "`dvc pull train@placement`",
                "`dvc repro train@placement` trains them"):
        assert way in words, way


def test_the_summary_shows_a_sample_of_each_ladder_rung_and_placement_variant(project):
    samples = json.loads((project.root / "reports/samples.json").read_text())
    params = project.params
    expected = [f"{a}/{v}" for a in ("ladder", "placement") for v in params["ablations"][a]["variants"]]
    assert list(samples["samples"]) == expected
    summary = (project.root / "reports/summary.md").read_text()
    section = summary.split("## What the models write\n", 1)[1]
    for key, sample_ in samples["samples"].items():
        assert f"```text\n{sample_['text']}\n```" in section
    assert "temperature 0.8, top-k 200, seed 1337" in section


def test_the_samples_and_the_summary_are_byte_identical_when_made_again(project):
    files = [project.root / "reports/samples.json", project.root / "reports/summary.md"]
    before = [f.read_bytes() for f in files]
    project.run("dvc", "repro", "--force", "--single-item", "samples")
    project.run("dvc", "repro", "--force", "--single-item", "report")
    assert [f.read_bytes() for f in files] == before


def test_a_map_cells_missing_weights_name_the_maps_stage_not_a_train_stage():
    from blocklab.tools.run_weights import weights_not_here

    spec = load_params(ROOT / "params.yaml").map_specs("stability")[0]
    words = " ".join(weights_not_here(spec, spec.seeds[0], Path("nowhere")).split())
    assert "`dvc pull map@stability`" in words, words
