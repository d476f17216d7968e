"""Every stage lists, as DVC dependencies, the project's modules its command imports (directly or not),
so that changing one re-runs the stages that use it, and no other module, so that changing it re-runs
nothing else. Imports only for type annotations do not count."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "blocklab"
# not worth a line in every stage: the errors' messages, and the packages' docstrings
ALWAYS_IMPORTED = {"src/blocklab/errors.py", *(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("__init__.py"))}


def _file(module: str) -> Path | None:
    """The source file of `blocklab.<...>` (a package's __init__.py), if it is the project's."""
    relative = module.split(".", 1)[1].replace(".", "/")
    for file in (PACKAGE / f"{relative}.py", PACKAGE / relative / "__init__.py"):
        if file.exists():
            return file
    return None


def _runtime_nodes(tree: ast.AST):
    """Every node, except inside `if TYPE_CHECKING:` blocks."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            continue
        yield node
        yield from _runtime_nodes(node)


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("blocklab"):
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names if alias.name.startswith("blocklab"))
    return {name for name in names if "." in name and _file(name) is not None}


def _closure(path: Path) -> set[str]:
    """Project source files reached from `path` by imports, as paths relative to the repository."""
    seen, todo = set(), [path]
    while todo:
        for module in _imported_modules(todo.pop()):
            file = _file(module)
            relative = str(file.relative_to(ROOT))
            if relative not in seen:
                seen.add(relative)
                todo.append(file)
    return seen


def _stages():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for name, stage in stages.items():
        stage = stage.get("do", stage)
        words = stage["cmd"].split()
        if words[0] == "python":
            yield name, {words[1]} | _closure(ROOT / words[1]), stage["deps"]
        elif words[0] == "blocklab":  # the command's own module (blocklab.cli only finds it)
            from blocklab.cli import COMMANDS

            module = _file(COMMANDS[words[1]].split(":")[0])
            yield name, {str(module.relative_to(ROOT))} | _closure(module), stage["deps"]


RUN_PACKAGE = "src/blocklab/run"
TRAINS = ("train", "map")  # the train and map stages: their code is what decides a run's numbers, blocklab.run


def _covered(deps: list[str]) -> set[str]:
    """The project's source files a stage's deps name, a folder standing for every file in it."""
    files = set(deps)
    for dep in deps:
        if dep.startswith("src/blocklab/") and (ROOT / dep).is_dir():
            files |= {str(p.relative_to(ROOT)) for p in (ROOT / dep).rglob("*.py")}
    return files


@pytest.mark.parametrize("name, needed, deps", list(_stages()), ids=[s[0] for s in _stages()])
def test_a_stage_depends_on_every_project_module_its_command_imports(name, needed, deps):
    """A train or map stage depends on blocklab.run, whole, and the corpus: what its runs' keys hash (the stage's
    script, where and when runs train, blocklab.schedule, and the command-line plumbing change no result, and
    re-run no stage)."""
    if name in TRAINS:  # the rest of what the stage imports decides where and when, not the numbers
        assert deps == [RUN_PACKAGE, "data/encoded"], "a train stage depends on its run key's code and the corpus"
        return
    missing = sorted(needed - _covered(deps) - ALWAYS_IMPORTED)
    assert not missing, f"stage {name} imports {missing} without listing them in its deps"


@pytest.mark.parametrize("name, needed, deps", list(_stages()), ids=[s[0] for s in _stages()])
def test_a_stage_depends_on_no_project_module_its_command_does_not_import(name, needed, deps):
    listed = {dep for dep in deps if dep.startswith("src/blocklab/") and dep.endswith(".py")}
    extra = sorted(listed - needed - ALWAYS_IMPORTED)
    assert not extra, f"stage {name} lists {extra} in its deps but never imports them"


def test_the_stages_that_do_not_train_do_not_import_torch():
    # Importing torch takes ~2 s; downloading, encoding, counting the baselines, evaluating, drawing, tracking and
    # checking need none.
    modules = ["params.schema", "run.data", "run.results", "analysis.baselines", "analysis.reference", "analysis.runs", "analysis.summary",
               "analysis.plots", "analysis.claims", "analysis.check", "tools.tracking", "cli", "commands.check",
               "commands.track"]
    code = "import sys\n" + "".join(f"import blocklab.{m}\n" for m in modules) + "print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_every_third_party_package_the_code_imports_is_declared_in_pyproject():
    import importlib.metadata
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    # an optional feature's import (dask.distributed for blocklab.schedule.cluster) is declared in its extra
    every = project["dependencies"] + [d for extra in project.get("optional-dependencies", {}).values() for d in extra]
    declared = {re.split(r"[<>=!~ ;\[]", d, maxsplit=1)[0].lower().replace("_", "-") for d in every}
    distributions = importlib.metadata.packages_distributions()
    imported = set()
    for path in [*PACKAGE.rglob("*.py"), *(ROOT / "stages").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    third_party = {name for name in imported - set(sys.stdlib_module_names) if name != "blocklab"}
    undeclared = {name: distributions.get(name) for name in third_party
                  if not {d.lower() for d in distributions.get(name, [name])} & declared}
    assert not undeclared, f"imported but not in pyproject's dependencies: {undeclared}"


def test_a_train_stages_name_says_what_it_trains_and_nothing_else_reads_as_one():
    from blocklab.schedule.train_stages import TrainStage, stage_name, train_stage

    assert stage_name("placement") == "train@placement" and stage_name("stability", is_map=True) == "map@stability"
    assert train_stage("train@placement") == TrainStage("train@placement", "placement")
    assert train_stage("map@stability") == TrainStage("map@stability", "stability")
    assert [train_stage(name) for name in ("evaluate", "train", "train@", "report@x")] == [None] * 4


def test_a_stage_that_runs_a_blocklab_command_depends_on_that_command_alone():
    """Editing another command (`sample`'s help text, say) re-runs neither `check` nor `track`."""
    from blocklab.cli import COMMANDS

    commands = {str(_file(home.split(":")[0]).relative_to(ROOT)) for home in COMMANDS.values()}
    for name, needed, deps in _stages():
        stage_commands = commands & set(deps)
        cmd = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"][name]
        words = cmd.get("do", cmd)["cmd"].split()
        own = {str(_file(COMMANDS[words[1]].split(":")[0]).relative_to(ROOT))} if words[0] == "blocklab" else set()
        assert stage_commands == own, (name, sorted(stage_commands))
        assert "src/blocklab/cli.py" not in deps, name
