"""Shared fixtures: a throw-away copy of the project, run with the real DVC and the real corpus mirror;
servers and workers that stop with everything they started; and a check that no process the tests
started outlives the suite."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import filelock
import psutil
import pytest
import yaml

from blocklab.tools.processes import stop_group

ROOT = Path(__file__).resolve().parents[1]
# Tiny Shakespeare: the mirror CI points at, else the shared copy beside the repository.
SHARED_CORPUS = Path(
    os.environ.get("BLOCKLAB_DATA_MIRROR") or ROOT.parent / "shared" / "data" / "tinyshakespeare" / "input.txt"
)
PROJECT_FILES = ["dvc.yaml", "params.yaml", "reference.yaml", "claims.yaml", "stages", "src", ".dvcignore",
                 ".gitignore", "reports/README.md"]

# The lesson's claims need the real corpus and full training; a small plan is checked against these.
SMALL_PLAN_CLAIMS = """
claims:
  - id: uniform_is_ln_v
    claim: The uniform baseline of the 28-character corpus is ln 28.
    kind: invariant
    rule: within
    value: baseline("uniform")
    expected: 3.33220451
    tolerance: 0.000001
  - id: one_layer_parameters
    claim: A 1-layer TinyLM over 28 characters with context 16 has 54,748 parameters.
    kind: invariant
    rule: exact
    value: metric("placement/pre/seed0", "n_params")
    expected: 54748
  - id: pre_norm_learns
    claim: Pre-norm ends below the unigram baseline (seed mean) - it learns more than character frequencies.
    kind: finding
    rule: compare
    left: mean("placement/pre")
    op: "<"
    right: baseline("unigram")
"""


def sha256_of(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def small_corpus(path: Path, n_chars: int = 12_000, seed: int = 0) -> Path:
    """A short UTF-8 text with a vocabulary of 28 characters (not Tiny Shakespeare's 65), some non-ASCII."""
    rng = random.Random(seed)
    words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to", "über", "café"]
    text = []
    while sum(map(len, text)) < n_chars:
        text.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))).capitalize() + ".\n")
    path.write_text("".join(text), encoding="utf-8")
    return path


# No single command of a test's project copy may take longer (a full small-plan `dvc repro` takes ~1 min).
COMMAND_TIMEOUT = 900.0


class Project:
    """A fresh git + DVC copy of blocklab in a temporary folder, and ways to run commands in it."""

    def __init__(self, root: Path, corpus: Path):
        self.root = root
        # MLflow's own variables are left out: a copy's commands log to its own workspace store unless a test
        # names another (`mlflow.set_tracking_uri` in a test exports $MLFLOW_TRACKING_URI to this process, and a
        # later copy's `dvc exp run` would otherwise log there).
        self.env = {
            **{name: value for name, value in os.environ.items() if not name.startswith("MLFLOW_")},
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "BLOCKLAB_DATA_MIRROR": str(corpus),
            "DVC_NO_ANALYTICS": "1",
        }

    def run(self, *cmd: str, check: bool = True, timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess:
        """Run `cmd` in the copy and wait for it, not for its output's end: a daemon it leaves running (DVC's
        queue workers keep the stdout they were forked with) must not hold the test up. A command still
        running after `timeout` seconds is stopped with its process group and fails the test with what it
        had printed, so that a hang costs one test, not the suite."""
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            process = subprocess.Popen(cmd, cwd=self.root, env=self.env, stdout=out, stderr=err, text=True,
                                       start_new_session=True)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
            finally:
                if process.poll() is None:  # timed out, or the test itself was interrupted
                    stop_group(process.pid)
                    process.wait(timeout=30)
                    timed_out = True
                else:
                    timed_out = False
            stdout, stderr = (f.seek(0) or f.read() for f in (out, err))
        if timed_out:
            raise AssertionError(f"{' '.join(cmd)} still running after {timeout:.0f} s, stopped:\n{stdout}\n{stderr}"
                                 f"{self.diagnostics()}")
        result = subprocess.CompletedProcess(cmd, process.returncode, stdout, stderr)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
        return result

    def diagnostics(self) -> str:
        """What DVC's experiment queue logged in the copy, if it ran (its workers' and experiments' output)."""
        logs = sorted((self.root / ".dvc" / "tmp" / "exps").glob("**/*.out"))
        return "".join(f"\n--- {log.relative_to(self.root)}:\n{log.read_text(errors='replace')[-4000:]}" for log in logs)

    @property
    def params(self) -> dict:
        return yaml.safe_load((self.root / "params.yaml").read_text())

    @params.setter
    def params(self, value: dict) -> None:
        (self.root / "params.yaml").write_text(yaml.safe_dump(value, sort_keys=False))

    def commit(self, message: str = "state") -> None:
        self.run("git", "add", "-A")
        self.run("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", message)


def copy_project(dest: Path, corpus: Path) -> Project:
    for name in PROJECT_FILES:
        src = ROOT / name
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(src, target)
    project = Project(dest, corpus)
    project.run("git", "init", "-q")
    # An identity of the copy's own: `dvc exp run` commits, and a fresh machine has no global git config.
    project.run("git", "config", "user.name", "blocklab tests")
    project.run("git", "config", "user.email", "tests@blocklab.invalid")
    project.run("dvc", "init", "-q")
    shutil.copytree(ROOT / ".dvc" / "plots", dest / ".dvc" / "plots")  # the plots' templates (dvc.yaml's `template:`)
    return project


def shrink(params: dict, corpus: Path, steps: int = 12, variants: int = 2) -> dict:
    """The default plan, made tiny: the small corpus, a few steps, at most `variants` variants and
    two seeds per ablation, shallow stacks for the gradient analysis; a map over learning rate and warmup
    (or, if it maps depth, over 1 and 2 blocks, alone where depth is its only axis; if width alone, the scale map,
    over widths 8 and 16)."""
    params["data"]["sha256"] = sha256_of(corpus)
    params["defaults"]["train"].update(eval_interval=5, eval_windows=16, batch_size=8)
    params["defaults"]["model"].update(context=16)
    params["gradients"]["depths"] = [1, 2]
    for ablation in params["ablations"].values():
        ablation["train"].update(steps=steps, eval_interval=5)
        ablation["seeds"] = ablation["seeds"][:2]
        ablation["variants"] = dict(list(ablation["variants"].items())[:variants])
        ablation["labels"] = {k: v for k, v in ablation.get("labels", {}).items() if k in ablation["variants"]}
        for variant in ablation["variants"].values():
            variant.setdefault("model", {})["n_layers"] = min(variant.get("model", {}).get("n_layers", 1), 2)
            if "steps" in variant.get("train", {}):
                variant["train"]["steps"] = steps
            if variant.get("train", {}).get("warmup", 0) > steps:  # a warmup no longer than the run
                variant["train"]["warmup"] = steps
        ablation["model"].pop("n_layers", None)
    for plan in params.get("maps", {}).values():  # 2 variants x 2 learning rates x 2 warmups x 2 seeds
        plan["train"].update(steps=steps, eval_interval=5)
        if plan["train"].get("warmup", 0) > steps:  # a warmup no longer than the run
            plan["train"]["warmup"] = steps
        plan["seeds"] = plan["seeds"][:2]
        plan["variants"] = dict(list(plan["variants"].items())[:variants])
        plan["labels"] = {k: v for k, v in plan.get("labels", {}).items() if k in plan["variants"]}
        plan["model"].pop("n_layers", None)
        if "n_layers" in plan["axes"].get("model", {}) and "lr" not in plan["axes"].get("train", {}):
            plan["axes"] = {"model": {"n_layers": [1, 2]}}  # a size axis over depth: 1 and 2 blocks
        elif "n_layers" in plan["axes"].get("model", {}):  # a map over depth keeps it: 1 and 2 blocks
            plan["axes"] = {"model": {"n_layers": [1, 2]}, "train": {"lr": [0.001, 0.01]}}
        elif "d_model" in plan["axes"].get("model", {}) and "lr" not in plan["axes"].get("train", {}):
            plan["axes"] = {"model": {"d_model": [8, 16]}}  # a size axis (its variants set their rates): two widths
        else:
            plan["axes"] = {"train": {"lr": [0.001, 0.01], "warmup": [0, 5]}}
    params["defaults"]["model"]["n_layers"] = 1
    return params


@pytest.fixture
def corpus(tmp_path) -> Path:
    return small_corpus(tmp_path / "corpus.txt")


def make_small_project(root: Path) -> Project:
    """The project on a small corpus with a tiny plan, committed, nothing run yet."""
    corpus = small_corpus(root / "corpus.txt")
    project = copy_project(root / "project", corpus)
    project.params = shrink(project.params, corpus)
    (project.root / "claims.yaml").write_text(SMALL_PLAN_CLAIMS)
    project.commit("small plan")
    return project


@pytest.fixture
def small_project(tmp_path) -> Project:
    return make_small_project(tmp_path)


# What a run or a report holds that the same parameters reproduce byte for byte (wall times are apart).
DETERMINISTIC_RUN_FILES = ("metrics.json", "curve.csv", "layers.csv", "weights.sha256", "sample.txt", "model.pt")
MLFLOW_STORE = ("mlflow.db", "mlflow.db.lock", "mlartifacts", "mlruns")


def outputs_of(root: Path) -> dict[str, bytes]:
    """A reproduced project's deterministic outputs: every run's metrics, curve and weights, and every report
    but the wall times."""
    runs = [p for p in (root / "data" / "runs").rglob("*") if p.name in DETERMINISTIC_RUN_FILES]
    reports = [p for p in (root / "reports").rglob("*") if p.is_file() and p.name != "timings.json"]
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(runs + reports)}


@pytest.fixture(scope="session")
def reproduced_project(tmp_path_factory) -> Project:
    """A small project after one `dvc repro` (which also logs to <project>/mlflow.db), shared by the
    session's tests: they may run more experiments in it, never undo one. What that first `dvc repro` wrote
    is kept: its output (`first_repro`), its deterministic files (`outputs`), and the whole project as it
    was (`pristine`, without its MLflow store), which `pristine_copy` copies for a test that changes it.

    Under pytest-xdist (`make test` runs one worker per core) the first `dvc repro` is still made once: the
    first worker to need it makes it, under a file lock, in the folder the workers share; every worker then
    works in a copy of its own, whose MLflow store `blocklab track` fills as the track stage did (a copied
    store would still point at the first project's artifacts)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:  # one process (pytest -p no:xdist, or -n 0)
        return _first_repro(tmp_path_factory.mktemp("reproduced"))
    shared = tmp_path_factory.getbasetemp().parent / "reproduced"
    with filelock.FileLock(f"{shared}.lock"):
        if not (shared / "made").exists():
            first = _first_repro(shared)
            (shared / "made").write_text(json.dumps({"root": str(first.root), "pristine": str(first.pristine),
                                                     "stdout": first.first_repro.stdout,
                                                     "stderr": first.first_repro.stderr}))
    made = json.loads((shared / "made").read_text())
    first = Project(Path(made["root"]), Path(made["root"]).parent / "corpus.txt")
    first.pristine = Path(made["pristine"])
    first.first_repro = subprocess.CompletedProcess(["dvc", "repro"], 0, made["stdout"], made["stderr"])
    first.outputs = outputs_of(first.pristine)
    project = pristine_copy(first, tmp_path_factory.mktemp("reproduced-here") / "project")
    project.run("blocklab", "track")
    project.pristine = first.pristine
    return project


def _first_repro(root: Path) -> Project:
    root.mkdir(parents=True, exist_ok=True)
    project = make_small_project(root)
    project.first_repro = project.run("dvc", "repro")
    project.outputs = outputs_of(project.root)
    project.pristine = root / "pristine" / "project"
    shutil.copytree(project.root, project.pristine, symlinks=True, ignore=shutil.ignore_patterns(*MLFLOW_STORE))
    return project


def pristine_copy(reproduced: Project, dest: Path) -> Project:
    """A project of its own, as `reproduced` was right after its first `dvc repro` (git, DVC's cache and run
    cache, the run store and every output), with no MLflow store: a test that changes it trains only what
    its change touches."""
    shutil.copytree(reproduced.pristine, dest, symlinks=True)
    project = Project(dest, Path(reproduced.env["BLOCKLAB_DATA_MIRROR"]))
    project.first_repro, project.outputs = reproduced.first_repro, reproduced.outputs
    return project


def alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those of `processes` still running (an ended process waiting to be reaped has stopped)."""
    running = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                running.append(process)
        except psutil.NoSuchProcess:
            continue
    return running


def described(processes: list[psutil.Process]) -> str:
    parts = []
    for process in processes:
        try:
            parts.append(f"{process.pid} {' '.join(process.cmdline())[:160]}")
        except psutil.Error:
            parts.append(str(process.pid))
    return "; ".join(parts)


def stop_tree(process: subprocess.Popen, tree: list[psutil.Process], grace: float = 10.0) -> None:
    """Stop `process`'s process group, then anything of its tree that left the group; fail naming any
    process of the tree that still runs."""
    stop_group(process.pid, grace)
    for straggler in alive(tree):
        straggler.kill()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    psutil.wait_procs(alive(tree), timeout=10)
    left = alive([psutil.Process(process.pid)] if process.returncode is None else []) + alive(tree)
    assert not left, f"still running after stopping {process.args[0]}: {described(left)}"
    # A grandchild (a server's worker) is re-parented here only as its own parent finishes exiting, which may
    # be just after a first reap (seen once in CI on a 2-core machine): reap until none is left, for a while.
    deadline = time.monotonic() + 10
    while True:
        reap_adopted(tree)
        zombies = [p for p in tree if _zombie_child(p)]
        if not zombies or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not zombies, f"left as zombies after stopping {process.args[0]}: {[p.pid for p in zombies]}"


def _zombie_child(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE and process.ppid() == os.getpid()
    except psutil.NoSuchProcess:
        return False


def reap_adopted(tree: list[psutil.Process]) -> None:
    """Reap those of `tree` that ended as this process's children. The test process is a subreaper: a
    server's process whose parent exited first (PostgreSQL's postmaster under `runuser`) is re-parented
    here, and once ended it stays a zombie until reaped by this process, or by PID 1 after the suite."""
    for member in tree:
        try:
            os.waitpid(member.pid, os.WNOHANG)
        except ChildProcessError:  # not a child of this process (or already reaped)
            pass


def tree_of(process: subprocess.Popen) -> list[psutil.Process]:
    try:
        root = psutil.Process(process.pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


@contextmanager
def started(cmd: list[str], **popen) -> subprocess.Popen:
    """A server or worker in a process group of its own. Leaving the block, also when the test fails
    half-way, stops the group and every process it started, and checks that none of them still runs."""
    process = subprocess.Popen(cmd, start_new_session=True, **popen)
    seen: dict[int, psutil.Process] = {}
    try:
        yield process
    finally:
        seen.update({p.pid: p for p in tree_of(process)})
        stop_tree(process, list(seen.values()))


PR_SET_CHILD_SUBREAPER = 36
# multiprocessing's own helpers for the test process (started by a spawn or forkserver pool): they end
# with the process they serve, which is still running when the suite's check runs.
OWN_HELPERS = ("from multiprocessing.resource_tracker import main", "from multiprocessing.forkserver import main")


def started_by_tests(before: set[int]) -> list[psutil.Process]:
    """The test process's running descendants that were not there at `before`, but its own helpers."""
    found = []
    for process in alive(psutil.Process().children(recursive=True)):
        try:
            if process.pid not in before and not any(h in " ".join(process.cmdline()) for h in OWN_HELPERS):
                found.append(process)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.fixture(autouse=True, scope="session")
def _no_process_outlives_the_suite():
    """At the end of the session, no process started by the tests may still run. The test process is made
    a subreaper first, so that a process whose parent ended without it (a server's orphaned worker)
    is re-parented here, stays a descendant, and is found."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    deadline = time.monotonic() + 15  # what is stopping may take a moment
    while (survivors := started_by_tests(before)) and time.monotonic() < deadline:
        time.sleep(0.5)
    names = described(survivors)  # before they are killed: a killed process has no command line left
    for process in survivors:
        process.kill()
    reap_ended_children(before)
    assert not survivors, f"processes started by the tests still running at the end: {names}"


def reap_ended_children(before: set[int]) -> str:
    """Reap the test process's children that ended unreaped (zombies): processes it adopted as a subreaper when
    a test killed their parent's group (a prefetch's workers, a DVC queue's), which would otherwise stay zombies
    under PID 1 after the suite. Returns them, named."""
    found = []
    for child in psutil.Process().children():
        try:
            if child.pid not in before and child.status() == psutil.STATUS_ZOMBIE:
                found.append(f"{child.pid} {child.name()}")
                os.waitpid(child.pid, os.WNOHANG)
        except (psutil.NoSuchProcess, ChildProcessError):
            continue
    return "; ".join(found)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# .ci/run installs PostgreSQL and Node.js and sets this: there a test that needs them fails instead of skipping.
REQUIRE_SYSTEM_TOOLS = "BLOCKLAB_REQUIRE_SYSTEM_TOOLS"


def system_tool_missing(what: str, install: str) -> NoReturn:
    """Skip the test, in one line naming what to install (`make test` on a machine without it); fail it where
    $BLOCKLAB_REQUIRE_SYSTEM_TOOLS is set (CI, which installs it)."""
    message = f"needs {what}, not installed here: {install}"
    if os.environ.get(REQUIRE_SYSTEM_TOOLS):
        pytest.fail(f"{message} (${REQUIRE_SYSTEM_TOOLS} is set: CI runs every test)")
    pytest.skip(message)


def postgresql_bin() -> Path:
    """Where the Debian package's PostgreSQL programs are (`apt-get install -y postgresql`; .ci/run does)."""
    found = shutil.which("initdb") or next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))), None)
    if found is None:
        system_tool_missing("PostgreSQL (a team's MLflow server)",
                            "apt-get install postgresql (Debian, Ubuntu) or brew install postgresql (macOS)")
    return Path(found).resolve().parent


@contextmanager
def postgresql_server():
    """A real PostgreSQL on 127.0.0.1 and a free port, with a fresh cluster in a temporary folder and a
    database `mlflow`; yields its SQLAlchemy URL. It runs as the `postgres` user when the tests run as root
    (PostgreSQL refuses root), in the foreground under `started`, so it stops with the block."""
    bindir = postgresql_bin()
    home = Path(tempfile.mkdtemp(prefix="blocklab-postgres-"))
    as_user = []
    if os.geteuid() == 0:
        shutil.chown(home, "postgres")
        # util-linux's runuser lives in /usr/sbin, which a minimal PATH (CI's) leaves out
        runuser = shutil.which("runuser", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") or "runuser"
        as_user = [runuser, "-u", "postgres", "--"]
    data, port = home / "data", free_port()
    try:
        subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(data), "-U", "blocklab", "--auth=trust",
                        "-E", "UTF8", "--no-sync"], check=True, capture_output=True, text=True)
        server = [*as_user, str(bindir / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(port),
                  "-k", str(home), "-c", "fsync=off"]
        with started(server, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as process:
            deadline = time.time() + 60
            while subprocess.run([str(bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
                                 capture_output=True).returncode != 0:
                assert process.poll() is None and time.time() < deadline, "PostgreSQL did not start"
                time.sleep(0.2)
            subprocess.run([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "blocklab", "mlflow"],
                           check=True, capture_output=True, text=True)
            try:
                yield f"postgresql://blocklab@127.0.0.1:{port}/mlflow"
            finally:  # PostgreSQL's own fast shutdown: the postmaster ends its backends and reaps them
                subprocess.run([*as_user, str(bindir / "pg_ctl"), "stop", "-D", str(data), "-m", "fast", "-w",
                                "-t", "30"], capture_output=True, timeout=60)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def wait_until_healthy(base: str, process: subprocess.Popen, seconds: float = 240) -> None:
    """Until an MLflow server answers /health; start-up imports MLflow, slow on a loaded machine."""
    import urllib.request

    deadline = time.time() + seconds
    while True:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2):
                return
        except OSError:
            assert time.time() < deadline and process.poll() is None, f"{process.args[0]} did not start"
            time.sleep(0.5)


@contextmanager
def mlflow_server_process(backend: str, artifacts: Path, port: int | None = None):
    """A real `mlflow server` on 127.0.0.1 over `backend` (serving the artifacts under `artifacts`); yields its
    base URL once it answers, and its process (the leader of its own process group)."""
    port = port or free_port()
    mlflow = Path(sys.executable).with_name("mlflow")
    with started([str(mlflow), "server", "--backend-store-uri", backend, "--artifacts-destination", str(artifacts),
                  "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as server:
        base = f"http://127.0.0.1:{port}"
        wait_until_healthy(base, server)
        yield base, server


@contextmanager
def mlflow_server(backend: str, artifacts: Path, port: int | None = None):
    """`mlflow_server_process`'s base URL alone."""
    with mlflow_server_process(backend, artifacts, port) as (base, _):
        yield base
