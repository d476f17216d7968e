"""The `blocklab` command behaves as a command-line tool is expected to: --version, one-line help for every
command with users' and developers' commands apart, one --params option everywhere, and commands that explain
what they need on a fresh clone instead of failing."""

from importlib.metadata import version
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from blocklab.cli import SECTIONS, main


def test_version_is_the_installed_packages():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and result.output == f"blocklab {version('blocklab')}\n"


def test_help_lists_every_command_once_under_a_heading_with_a_whole_line_of_help():
    text = CliRunner().invoke(main, ["--help"], terminal_width=100).output
    listed = [name for names in SECTIONS.values() for name in names]
    assert sorted(listed) == sorted(main.commands)  # every command in one section, none twice
    for heading in SECTIONS:
        assert f"\n{heading}:\n" in text
    assert text.index("For blocklab's developers:") > text.index("Look at the results:")
    assert text.index("  bench ") > text.index("For blocklab's developers:")
    for name, command in main.commands.items():
        assert command.short_help and not command.short_help.endswith("..."), name
        line = next(line for line in text.splitlines() if line.startswith(f"  {name} "))
        assert line.rstrip().endswith(command.short_help), line  # whole, on one line


def test_every_params_option_is_the_same_file_option_with_the_same_help():
    options = [(name, p) for name, command in main.commands.items() for p in command.params if p.name == "params_file"]
    assert len(options) >= 7
    for name, option in options:
        assert option.opts == ["--params"] and option.default == "params.yaml", name
        assert isinstance(option.type, click.Path) and not option.type.dir_okay, name
        assert option.help == options[0][1].help, name


def test_store_on_a_fresh_clone_says_there_is_no_store_yet(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["store"])
    assert result.exit_code == 0, result.output
    assert "no run store yet" in result.output and "make demo" in result.output


def test_a_fresh_clone_compares_commits_checks_and_says_what_sampling_needs(tmp_path):
    """Before any run, in a clone: `blocklab diff` compares the workspace (its committed reports) with HEAD, and
    `blocklab sample` says what to run; neither fails for want of data/."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    blocklab = str(Path(sys.executable).with_name("blocklab"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}

    def run(*args):
        return subprocess.run([blocklab, *args], cwd=clone, capture_output=True, text=True, env=env, timeout=300)

    diff = run("diff")
    assert diff.returncode == 0, diff.stderr
    assert diff.stdout.startswith("blocklab diff HEAD -> workspace: 0 claims changed verdict")
    sample = run("sample", "placement/pre")
    assert sample.returncode == 1 and "weights are not on this machine" in sample.stderr, sample.stderr
    for way in ("reports/runs/placement/pre/seed0/", "`dvc pull train@placement`",
                "`dvc repro train@placement`", "minutes on this machine's"):
        assert way in " ".join(sample.stderr.split()), way
    assert "no run store yet" in run("store").stdout


@pytest.mark.parametrize("args, old, new", [
    (["sample", "placement/pre"], "--runs", "--weights"),  # an empty folder: no weights here, exit 1
    (["audit"], "--runs", "--run"),  # a run the plan does not have, exit 1
    (["track", "--tracking-uri", "sqlite:///{tmp}/store.db"], "--runs", "--records"),  # no records: warns, exit 0
], ids=["sample", "audit", "track"])
def test_an_options_former_name_still_works_says_its_new_one_and_is_not_in_help(tmp_path, args, old, new):
    """The same value under either name gives the same outcome; the former adds one line on standard error."""
    value = "placement/nowhere/seed0" if new == "--run" else str(tmp_path)
    args = [arg.format(tmp=tmp_path) for arg in args]
    if args[0] == "track":  # made before, so that neither call has MLflow's lines about making it
        from blocklab.tools.tracking import ensure_store

        ensure_store(f"sqlite:///{tmp_path}/store.db")
    runner = CliRunner()
    now, before = runner.invoke(main, [*args, new, value]), runner.invoke(main, [*args, old, value])
    assert before.exit_code == now.exit_code, (before.output, now.output)
    assert now.stderr, now.output  # each says what is wrong
    notice = f"note: {old} is now {new} (the old name still works)\n"
    assert before.stderr == notice + now.stderr, (before.stderr, now.stderr)
    assert old not in runner.invoke(main, [args[0], "--help"]).output


def test_check_reads_the_records_under_either_name_of_the_option(tmp_path):
    runner = CliRunner()
    for name in ("--records", "--runs"):
        result = runner.invoke(main, ["check", name, "reports/runs", "--out", str(tmp_path / f"{name[2:]}.json")])
        assert result.exit_code == 0, result.output
    assert (tmp_path / "records.json").read_text() == (tmp_path / "runs.json").read_text()
