"""``lch sweep``'s work: every cell planned (``lch plan``: prompt tokens, peak memory, time), its identity and
folder found, the cells with a complete result skipped, the others run as Ray tasks placed by their planned memory,
and the outcome of each gathered. Layout of a sweep folder::

    <out>/sweep.json              the sweep as run: its cells, identities, plans, outcomes, cost
    <out>/cells/<label>-<id>/     a cell's lm-eval output and cell.json (written last: the result is complete)
    <out>/logs/<label>-<id>.log   the cell's lch eval output, one block per attempt
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import LchError, MissingDataError, UsageError
from harness.core.files import TMP_SUFFIX
from harness.sweep.placement import Need, Node, need_of, refusal, where_words
from harness.sweep.spec import Cell, SweepSpec
from harness.sweep.worker import CELLS, COMPLETE, CellKilled, Outcome, run_cell_reporting

# the environment a cell's lch eval sees on any node: ours, the hub's and transformers' switches
PASSED_ENVIRONMENT = ("LCH_", "HF_", "TRANSFORMERS_", "TOKENIZERS_", "PYTHONPATH")
RAY_MISSING = "lch sweep runs its cells on Ray, which is not installed: pip install 'lch-harness[ray]' (or ray>=2.40)"


@dataclass
class PlannedCell:
    """A cell with its identity, folder, plan (peak bytes, tokens, estimated seconds), placement and outcome."""

    cell: Cell
    identity: str
    folder: Path
    planned: int | None = None
    tokens: int = 0
    seconds: float | None = None
    need: Need | None = None
    where: str = ""
    status: str = "to run"  # to run | skipped | done | failed
    line: str = ""  # a failed cell's one line
    outcome: Outcome | None = None
    submitted: float = 0.0  # epoch seconds: handed to Ray, and its outcome back here (Ray's overhead around the task)
    gathered: float = 0.0

    def row(self) -> dict[str, Any]:
        return {
            "label": self.cell.label,
            "identity": self.identity,
            "folder": self.folder.name,
            "step": self.cell.step,
            "model": self.cell.model,
            "variant": self.cell.variant,
            "model_args": self.cell.model_args,
            "planned_memory": self.planned,
            "tokens": self.tokens,
            "estimated_seconds": self.seconds,
            "need": asdict(self.need) if self.need else None,
            "status": self.status,
            "line": self.line,
            "outcome": asdict(self.outcome) if self.outcome else None,
            "submitted": self.submitted or None,
            "gathered": self.gathered or None,
        }


def cell_identity(cell: Cell) -> str:
    """What makes a cell's result the same result: the model's content (and an adapter's), the other model args,
    tasks, metadata, lm-eval's flags, the engine and its libraries' versions (as ``lch rerun`` holds them)."""
    from harness.engines.registry import model_entry
    from harness.engines.response_cache import libraries_in_words
    from harness.models.identity import model_identity

    entry = model_entry(cell.engine)
    libraries = libraries_in_words(*getattr(entry.cls, "LIBRARIES", ())) if entry is not None else ""
    args = dict(cell.model_args)
    content = {name: model_identity(args.pop(name)) for name in ("pretrained", "peft") if args.get(name)}
    key = {
        "content": content,
        "model_args": args,
        "tasks": list(cell.tasks),
        "metadata": cell.metadata,
        "lm_eval": cell.lm_eval,
        "engine": cell.engine,
        "libraries": libraries,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


def folder_name(cell: Cell, identity: str) -> str:
    return f"{re.sub(r'[^A-Za-z0-9._-]+', '_', cell.label).strip('_')}-{identity[:12]}"


def is_complete(folder: Path) -> bool:
    """Whether a cell's folder holds a complete result (its :data:`COMPLETE` file, written last)."""
    return (folder / COMPLETE).is_file()


def plan_cell(cell: Cell, planned: PlannedCell) -> None:
    """Fill ``planned``'s plan from ``lch plan`` of the cell's own command line; a user error fails the cell."""
    from harness.plan.command_line import estimate_source, plan_settings
    from harness.plan.make import make_plan
    from harness.plan.report import estimate_seconds

    run = plan_settings(cell.argv())
    plan = make_plan(run)
    memories = [c.memory for c in plan.cells if c.memory is not None]
    planned.planned = max(memories) if memories else None
    planned.tokens = sum(c.prompt_tokens + c.generated_tokens for c in plan.cells)
    throughput, _ = estimate_source(run, plan, False)
    planned.seconds = estimate_seconds(plan, throughput) if throughput is not None else None


def prepare(spec: SweepSpec, cells: Sequence[Cell], out: Path, log: Callable[[str], None]) -> list[PlannedCell]:
    """Every cell's identity and folder, and for those without a complete result their plan."""
    prepared = []
    for number, cell in enumerate(cells, 1):
        identity = cell_identity(cell)
        planned = PlannedCell(cell, identity, out / CELLS / folder_name(cell, identity))
        prepared.append(planned)
        if is_complete(planned.folder):
            planned.status = "skipped"
            continue
        log(f"planning cell {number}/{len(cells)}: {cell.label}")
        try:
            plan_cell(cell, planned)
        except LchError as err:
            planned.status, planned.line = "failed", f"lch: error: {err}"
    return prepared


def environment() -> dict[str, str]:
    """What of this process's environment a cell's ``lch eval`` gets on any node (:data:`PASSED_ENVIRONMENT`)."""
    return {k: v for k, v in os.environ.items() if k.startswith(PASSED_ENVIRONMENT)}


def ray_module() -> Any:
    try:
        import ray
    except ImportError as err:
        raise MissingDataError(RAY_MISSING) from err
    return ray


def connect(address: str | None) -> bool:
    """Ray for this sweep: the cluster at ``address``, else a local Ray on loopback started here (True: started
    here, so this sweep shuts it down)."""
    ray = ray_module()
    if ray.is_initialized():
        return False
    common = {"log_to_driver": False, "configure_logging": True, "logging_level": "ERROR"}
    if address:
        try:
            ray.init(address=address, **common)
        except (ConnectionError, ValueError, RuntimeError) as err:
            raise UsageError(
                f"--address {address}: no Ray cluster answers there ({' '.join(str(err).split())[:160]}); "
                "start one (ray start --head) or leave out --address for a local one"
            ) from err
        return False
    ray.init(include_dashboard=False, _node_ip_address="127.0.0.1", **common)
    return True


def nodes(gpu_memory: int | None = None) -> list[Node]:
    """The alive nodes of the connected cluster."""
    ray = ray_module()
    return [Node.from_ray(n, gpu_memory) for n in ray.nodes() if n.get("Alive")]


def place(prepared: Sequence[PlannedCell], spec: SweepSpec, cluster: Sequence[Node]) -> list[str]:
    """Each cell to run gets its :class:`Need` and the nodes it may land on; the refusals of cells that fit no node."""
    refusals = []
    for p in prepared:
        if p.status != "to run":
            continue
        p.need = need_of(p.planned, spec.engine, p.cell.model_args, cluster, spec.resources.cpus)
        p.where = where_words(p.need, cluster)
        why = refusal(p.cell.label, p.need, p.planned, cluster)
        if why:
            refusals.append(why)
    return refusals


def run_cells(prepared: Sequence[PlannedCell], spec: SweepSpec, cwd: str) -> None:
    """Run every cell to run as a Ray task, one progress bar over them; each outcome lands on its cell."""
    from tqdm import tqdm

    ray = ray_module()
    todo = [p for p in prepared if p.status == "to run"]
    if not todo:
        return
    task = ray.remote(run_cell_reporting)
    env = environment()
    weights = {id(p): p.seconds or float(p.tokens) or 1.0 for p in todo}  # the plan's estimate, else its tokens
    refs = {}
    for p in todo:
        assert p.need is not None
        record = {"label": p.cell.label, "identity": p.identity, "step": p.cell.step, "argv": p.cell.argv()}
        options = {
            **p.need.ray_options(),
            "max_retries": spec.resources.retries,
            "retry_exceptions": [CellKilled],
            "name": f"lch-sweep:{p.cell.label}",
        }
        p.submitted = time.time()
        refs[
            task.options(**options).remote(p.cell.argv(), str(p.folder), record, env, max(1, int(p.need.cpus)), cwd)
        ] = p
    # one bar over the cells; its ETA weighs each by the plan's estimate (else its tokens), as the done cells ran
    fmt = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]"
    with tqdm(
        total=sum(weights.values()), desc=f"lch sweep 0/{len(todo)} cells", bar_format=fmt, file=sys.stderr
    ) as bar:
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            p = refs.pop(ready[0])
            p.gathered = time.time()
            try:
                p.outcome = ray.get(ready[0])
                p.status, p.line = p.outcome.status, p.outcome.line
            except Exception as err:  # noqa: BLE001 (Ray's own errors once its retries are spent: the cell failed)
                p.status, p.line = "failed", f"lch sweep: the cell's worker failed on every try: {_first_line(err)}"
            bar.set_description_str(f"lch sweep {len(todo) - len(refs)}/{len(todo)} cells")
            bar.update(weights[id(p)])


def _first_line(err: BaseException) -> str:
    cause = getattr(err, "cause", None) or err
    text = " ".join(str(cause).split())
    return f"{type(cause).__name__}: {text[:200]}"


def tidy(out: Path) -> None:
    """Temporary folders of attempts that were killed (a worker gone before it could rename or delete them)."""
    for leftover in (out / CELLS).glob(f".*{TMP_SUFFIX}"):
        shutil.rmtree(leftover, ignore_errors=True)


@dataclass
class SweepOutcome:
    prepared: list[PlannedCell]
    seconds: float
    ray_seconds: float = 0.0  # connecting to (or starting) Ray and shutting it down
    notes: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return all(p.status in ("done", "skipped") for p in self.prepared)


def sweep(
    spec: SweepSpec,
    cells: Sequence[Cell],
    out: Path,
    address: str | None = None,
    dry_run: bool = False,
    gpu_memory: int | None = None,
    log: Callable[[str], None] = print,
) -> SweepOutcome:
    """Plan, place and run ``cells`` into ``out`` (module docstring); refuses before any cell runs when one fits no
    node of the cluster."""
    from harness.sweep.gather import plan_table

    start = time.perf_counter()
    out = out.resolve()  # workers run elsewhere: every path handed to them is absolute
    ray_module()  # before any planning: a missing Ray costs nothing
    tidy(out)
    prepared = prepare(spec, cells, out, lambda line: print(line, file=sys.stderr))
    if not any(p.status == "to run" for p in prepared):  # nothing for Ray to do
        log(plan_table(prepared, []))
        return SweepOutcome(prepared, time.perf_counter() - start)
    t0 = time.perf_counter()
    started = connect(address)
    ray_seconds = time.perf_counter() - t0
    try:
        cluster = nodes(gpu_memory)
        refusals = place(prepared, spec, cluster)
        log(plan_table(prepared, cluster))
        if refusals:
            raise UsageError(refusals[0] + (f" (and {len(refusals) - 1} more cells)" if len(refusals) > 1 else ""))
        if not dry_run:
            run_cells(prepared, spec, os.getcwd())
    finally:
        t0 = time.perf_counter()
        if started:
            ray_module().shutdown()
        ray_seconds += time.perf_counter() - t0
        tidy(out)
    return SweepOutcome(prepared, time.perf_counter() - start, ray_seconds)
