"""The package's imports read one way: no module reaches itself through others (imports inside functions
included, those for type annotations only not), and a wing imports only the wings below it, so that a reader
(and a stage's dependencies) can take the tree from the bottom up."""

import graphlib

from test_stage_dependencies import PACKAGE, _file, _imported_modules

# Bottom up: what computes a run; params.yaml's schema; scheduling the runs; the findings; what serves people.
WINGS = ["run", "params", "schedule", "analysis", "tools"]


def _imports() -> dict[str, set[str]]:
    """Every project module (a path under src/blocklab) with the project modules it imports."""
    graph = {}
    for file in PACKAGE.rglob("*.py"):
        name = str(file.relative_to(PACKAGE))
        graph[name] = {str(_file(module).relative_to(PACKAGE)) for module in _imported_modules(file)} - {name}
    return graph


def test_no_module_imports_itself_through_others():
    try:
        graphlib.TopologicalSorter(_imports()).prepare()
    except graphlib.CycleError as cycle:
        raise AssertionError(f"an import circle: {' -> '.join(cycle.args[1])}") from None


def test_a_wing_imports_only_the_wings_below_it():
    def wing(module: str) -> str | None:
        return module.split("/")[0] if module.split("/")[0] in WINGS else None

    upward = sorted(f"{module} -> {imported}" for module, imported_modules in _imports().items()
                    for imported in imported_modules
                    if wing(module) and wing(imported) and WINGS.index(wing(imported)) > WINGS.index(wing(module)))
    assert upward == [], upward
