"""The README's commands, as written there, on a small pipeline: the walk through one experiment and
"Using DVC directly" (docs/pipeline.md). (The quick start's `make repro` and `make test` are what CI runs.)
And the README and docs state no result by hand: every one is written from reports/ (`blocklab docs`)."""

import re
import shlex
import subprocess

import psutil
import pytest

from conftest import ROOT, alive, described, free_port, started, tree_of, wait_until_healthy

TESTED_SECTIONS = {"README.md": "An experiment, step by step", "docs/pipeline.md": "Using DVC directly"}
ACTIVATE = ". .venv/bin/activate"  # the tests' PATH already leads to the project's environment
README_LINES = 250  # a newcomer reads it to the end: what does not fit goes to docs/, with a link


def readme_commands(document: str, section: str) -> list[str]:
    """Every command of the section's bash blocks, comments removed."""
    text = (ROOT / document).read_text()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line.split(" #")[0].strip() for block in re.findall(r"```bash\n(.*?)```", body, re.S)
             for line in block.splitlines()]
    return [line for line in lines if line and line != ACTIVATE]


def test_the_readme_is_short_enough_to_read_to_the_end():
    lines = len((ROOT / "README.md").read_text().splitlines())  # its generated tables and outputs included
    assert lines <= README_LINES, (f"README.md has {lines} lines, more than {README_LINES}: move what a newcomer "
                                   f"can do without to docs/ and link it")


def test_the_tested_sections_hold_the_commands_a_newcomer_needs():
    commands = [c for document, section in TESTED_SECTIONS.items() for c in readme_commands(document, section)]
    for needed in ["dvc repro", "dvc exp run --allow-missing -S",  # a fresh clone has the records, not the weights "dvc exp show", "dvc metrics diff", "dvc plots diff",
                   "blocklab params", "blocklab check", "blocklab diff", "blocklab ui"]:
        assert any(c.startswith(needed) for c in commands), needed


@pytest.mark.parametrize("document, section", TESTED_SECTIONS.items(), ids=TESTED_SECTIONS.values())
def test_every_readme_command_runs_on_a_small_pipeline_and_exits_0(reproduced_project, document, section):
    project = reproduced_project
    if project.run("git", "status", "--porcelain").stdout.strip():  # as a clone of blocklab has them, committed:
        project.commit("the default run's results")  # `blocklab diff` and `dvc metrics diff` compare with HEAD's
    for command in readme_commands(document, section):
        words = shlex.split(command)
        if words[:2] == ["blocklab", "ui"]:  # a server: it must come up and serve, then it is stopped
            port = free_port()
            with started([*words, "--port", str(port)], cwd=project.root, env=project.env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as ui:
                wait_until_healthy(f"http://127.0.0.1:{port}", ui)
                tree = tree_of(ui)
                ui.terminate()  # as a user's `kill` would: blocklab ui must take its server down with it
                ui.wait(timeout=60)
                psutil.wait_procs(tree, timeout=20)
                assert not alive(tree), described(alive(tree))
            continue
        result = project.run(*words)  # raises, with the output, on a non-zero exit
        if words[:3] == ["dvc", "metrics", "diff"]:
            assert "placement/pre.val_loss_mean" in result.stdout, result.stdout
        if words[:2] == ["blocklab", "diff"]:
            assert result.stdout.startswith("blocklab diff HEAD -> workspace: "), result.stdout
        if words[:3] == ["dvc", "exp", "run"]:
            assert "Ran experiment(s)" in result.stdout


def test_the_readmes_map_of_the_package_names_every_wing_and_nothing_else():
    readme = (ROOT / "README.md").read_text()
    table = readme.split("\n## The code\n", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(\w+)/` \|", table, re.M))
    wings = {p.parent.name for p in (ROOT / "src/blocklab").glob("*/__init__.py")}
    assert listed == wings
