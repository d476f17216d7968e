"""Each run's record (reports/runs/<run>/): what git keeps of a run, the run's own bytes, its weights kept out."""

import json
from pathlib import Path

import pytest
import torch

from blocklab.run.job import Job, run_job
from blocklab.run.data import Corpus
from blocklab.run.results import (DIGEST_FILE, RECORDED_FILES, SAMPLE_FILE, SETTINGS_FILE, weights_digest,
                                  write_record, write_run)
from blocklab.run.sample import RECORDED_CHARACTERS, recorded_sample
from blocklab.run.settings import ModelConfig, TrainConfig

MODEL = ModelConfig(d_model=16, n_heads=2, n_layers=1, context=8)
TRAIN = TrainConfig(steps=10, lr=1e-2, batch_size=8, eval_interval=5, eval_windows=16, device="cpu")


def tiny_corpus(chars: str = "\nabcdefghij") -> Corpus:
    g = torch.Generator().manual_seed(0)
    vocab = len(chars)
    return Corpus(chars=list(chars), train=torch.randint(0, vocab, (3000,), generator=g),
                  val=torch.randint(0, vocab, (800,), generator=g))


@pytest.fixture(scope="module")
def trained():
    corpus = tiny_corpus()
    return run_job(Job("a/v/seed0", MODEL, TRAIN, 0), corpus), corpus


def test_a_run_records_what_its_final_model_writes_after_nanogpts_newline_prompt(trained):
    result, corpus = trained
    assert result.sample is not None and result.sample.startswith("\n")
    assert len(result.sample) == 1 + RECORDED_CHARACTERS and set(result.sample) <= set(corpus.chars)
    assert recorded_sample(MODEL, result.weights, corpus.chars) == result.sample  # drawn from its final weights


def test_sampling_changes_no_bit_of_the_run(trained):
    """The sample is drawn after training: the weights and metrics equal those of the loop alone."""
    from blocklab.run.threads import torch_threads
    from blocklab.run.training import train_run

    result, corpus = trained
    with torch_threads(1):
        alone = train_run(MODEL, TRAIN, 0, corpus.train, corpus.val, corpus.vocab_size)
    assert alone.metrics == result.metrics and weights_digest(alone.weights) == weights_digest(result.weights)


def test_a_corpus_without_a_newline_prompts_with_its_first_character():
    corpus = tiny_corpus("abcdefghij")
    result = run_job(Job("a/v/seed0", MODEL, TRAIN, 0), corpus)
    assert result.sample is not None and result.sample[0] == "a"


def test_weights_that_are_not_finite_write_no_sample(trained):
    result, corpus = trained
    broken = {name: torch.full_like(t, float("nan")) if t.is_floating_point() else t
              for name, t in result.weights.items()}
    assert recorded_sample(MODEL, broken, corpus.chars) is None


def test_a_record_is_the_runs_own_bytes_with_its_settings_and_without_wall_times_or_weights(trained, tmp_path):
    result, _ = trained
    run, record = tmp_path / "run", tmp_path / "record"
    write_run(run, result, tokens_per_step=TRAIN.batch_size * MODEL.context)
    write_record(run, record, {"run": "a/v/seed0", "seed": 0})
    assert sorted(p.name for p in record.iterdir()) == sorted([*RECORDED_FILES, SETTINGS_FILE])
    for name in RECORDED_FILES:
        assert (record / name).read_bytes() == (run / name).read_bytes(), name
    assert (record / DIGEST_FILE).read_text() == weights_digest(result.weights) + "\n"
    assert (record / SAMPLE_FILE).read_text() == result.sample
    assert json.loads((record / SETTINGS_FILE).read_text()) == {"run": "a/v/seed0", "seed": 0}
    (run / SAMPLE_FILE).unlink()  # a run that wrote no sample: its record has none either, even over an old one
    write_record(run, record, {"run": "a/v/seed0", "seed": 0})
    assert not (record / SAMPLE_FILE).exists()


@pytest.mark.slow
def test_every_trained_run_has_its_record_in_reports_equal_to_what_it_wrote(reproduced_project):
    """The records the train stages write beside data/runs: one folder per run of the plan, named by its run
    key, every recorded file byte for byte the run's, its settings params.yaml's resolved ones."""
    from blocklab.params.schema import load_params
    from blocklab.schedule.plan import record_settings

    root = reproduced_project.root
    params = load_params(root / "params.yaml")
    runs = list(params.runs())
    assert runs
    for spec, seed in runs:
        key = spec.key(seed)
        ran = spec.directory(root / "data/runs" / spec.ablation / spec.variant) / f"seed{seed}"
        record = root / "reports/runs" / key
        for name in RECORDED_FILES:
            if name == SAMPLE_FILE and not (ran / name).exists():
                continue
            assert (record / name).read_bytes() == (ran / name).read_bytes(), f"{key}: {name}"
        assert json.loads((record / SETTINGS_FILE).read_text()) == json.loads(json.dumps(
            record_settings(spec, seed)))
    recorded = {p.parent.relative_to(root / "reports/runs").as_posix()
                for p in (root / "reports/runs").rglob(SETTINGS_FILE)}
    assert recorded == {spec.key(seed) for spec, seed in runs}  # nothing else, no wall time, no weights
    names = {p.name for p in (root / "reports/runs").rglob("*") if p.is_file()}
    assert names <= {*RECORDED_FILES, SETTINGS_FILE}


def test_every_committed_record_holds_the_settings_params_yaml_resolves_to_today():
    """A run's key hashes its resolved settings, but a train stage depends on params.yaml's values, not on the schema
    that resolves them (blocklab.params, outside the key): a change to how a value resolves would leave every train
    stage as it was. The committed records say what each run trained with; they must still be what params.yaml
    resolves to, and hold no run the plan no longer has."""
    from blocklab.params.schema import load_params
    from blocklab.schedule.plan import record_settings
    from blocklab.schedule.train_stages import RECORDS_DIR

    root = Path(__file__).resolve().parents[1]
    runs = load_params(root / "params.yaml").runs()
    for spec, seed in runs:
        recorded = json.loads((root / RECORDS_DIR / spec.key(seed) / SETTINGS_FILE).read_text())
        assert recorded == json.loads(json.dumps(record_settings(spec, seed))), spec.key(seed)
    on_disk = {p.parent.relative_to(root / RECORDS_DIR).as_posix() for p in (root / RECORDS_DIR).rglob(SETTINGS_FILE)}
    assert on_disk == {spec.key(seed) for spec, seed in runs}
