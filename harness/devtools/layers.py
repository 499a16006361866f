"""The package's layers as an import-linter contract of our own (``type = "declared_layers"`` in pyproject.toml's
``[tool.importlinter]``; ``lint-imports`` checks it with the built-in ones). A module's layer is its own ``LAYER``,
else its packages', else its folder's (the contract's ``layers``: ``name: folders -> layers it may import``); the
import graph is import-linter's (grimp: imports wherever written, none under ``if TYPE_CHECKING:``). The built-in
layers contract was tried and not taken for this: its layers may not contain one another, so a module declaring
another layer than its folder's would make every folder a list of leaf modules, and a new file would have no layer."""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path
from typing import cast

from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck

# Calls that read or write files: none may appear in a layer the contract names ``io_free``.
IO_CALLS = frozenset({"open", "read_text", "write_text", "read_bytes", "write_bytes", "urlopen"})


def parse_rule(line: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """``"pure: harness.metrics -> base"`` -> ``("pure", ("harness.metrics",), ("base",))``."""
    name, _, rest = line.partition(":")
    folders, _, allowed = rest.partition("->")
    split = lambda text: tuple(part.strip() for part in text.split(",") if part.strip() not in ("", "(nothing)"))
    return name.strip(), split(folders), split(allowed)


def declared_layer(path: Path | None) -> str | None:
    """The layer a source file declares at its top level (``LAYER = "data"``), None when it declares none (or is no
    file: a folder without ``__init__.py``)."""
    for node in ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body if path else ():
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "LAYER"
            and isinstance(node.value, ast.Constant)
        ):
            value = node.value.value
            return None if value is None else str(value)
    return None


def source_file(module: str) -> Path | None:
    """The file of one of the root package's modules, found without importing it; None for a folder without one."""
    root, *parts = module.split(".")
    spec = importlib.util.find_spec(root)
    assert spec is not None and spec.submodule_search_locations, f"{root} is no importable package"
    folder = Path(spec.submodule_search_locations[0]).joinpath(*parts)
    path = folder / "__init__.py" if folder.is_dir() else folder.with_suffix(".py")
    return path if path.is_file() else None


def layer_of(module: str, folders: dict[str, str], declared: dict[str, str], skip: str | None = None) -> str | None:
    """The layer of one of our modules: the nearest of itself and its packages upwards that declares one (``declared``,
    but not ``skip``) or is a layer's folder (``folders``); None for one with none. The root package's layer is its
    own, which it gives to none of the folders under it."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if end == 1 and len(parts) > 1:
            return None
        if prefix != skip and prefix in declared:
            return declared[prefix]
        if prefix in folders:
            return folders[prefix]
    return None


def io_calls(path: Path | None) -> set[str]:
    """The names of the file I/O calls (:data:`IO_CALLS`) in one source file."""
    tree = (
        ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        if path
        else ast.Module(body=[], type_ignores=[])
    )
    return {
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for name in [getattr(node.func, "id", None) or getattr(node.func, "attr", None)]
        if name in IO_CALLS
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: groups of two or more modules that reach each other (strongly connected
    components, scipy's), sorted."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    index = {module: i for i, module in enumerate(sorted(graph))}
    edges = [(index[module], index[t]) for module, targets in graph.items() for t in targets if t in index]
    matrix = coo_matrix(([1] * len(edges), ([a for a, _ in edges], [b for _, b in edges])), shape=(len(index),) * 2)
    _, labels = connected_components(matrix, directed=True, connection="strong")
    groups: dict[int, list[str]] = {}
    for module, label in zip(index, labels):
        groups.setdefault(label, []).append(module)
    return sorted(group for group in groups.values() if len(group) > 1)


class DeclaredLayersContract(Contract):
    """Each module imports only its own layer's modules, those of the layers it may import and no library its layer
    forbids (``forbidden``: ``"layer: library, ..."``); the ``io_free`` layers call no file I/O; every module of the
    root package has a layer, and declares one only where it differs from its package's or folder's; no modules import
    each other through any path (import-linter's acyclic_siblings, tried for this, also refuses two sibling packages
    whose modules import each other without a circle: engines.model_args -> engines.vllm_pic.imports beside
    engines.vllm_pic.lm -> engines.model_args)."""

    type_name = "declared_layers"
    layers = fields.ListField(subfield=fields.StringField())
    forbidden = fields.ListField(subfield=fields.StringField(), required=False)
    io_free = fields.SetField(subfield=fields.StringField(), required=False)

    def check(self, graph, verbose: bool) -> ContractCheck:
        # import-linter replaces each field on the instance by its parsed value (None: an optional one not given)
        layers = cast("list[str]", self.layers)
        forbidden_lines = cast("list[str] | None", self.forbidden)
        io_free = cast("set[str] | None", self.io_free)
        rules = [parse_rule(line) for line in layers]
        may_import = {name: set(allowed) | {name} for name, _, allowed in rules}
        folders = {folder: name for name, packages, _ in rules for folder in packages}
        forbidden = {
            name.strip(): {lib.strip() for lib in libraries.split(",")}
            for name, _, libraries in (line.partition(":") for line in forbidden_lines or ())
        }
        root = next(iter(folders)).split(".")[0]  # the package the rules are of
        ours = sorted(m for m in graph.modules if m == root or m.startswith(root + "."))
        declared = {m: name for m in ours if (name := declared_layer(source_file(m))) is not None}
        problems = [
            f"{m} declares LAYER = {name!r}, which is no layer: {', '.join(may_import)}"
            for m, name in declared.items()
            if name not in may_import
        ]

        layer = functools.partial(layer_of, folders=folders, declared=declared)
        for module in ours:
            own = layer(module)
            if module in declared and layer(module, skip=module) == own:
                problems.append(f"{module} declares LAYER = {own!r}, the layer it has without it: remove the line")
            if own is None:
                problems.append(
                    f'{module} has no layer: declare LAYER = "<layer>" in it or in its package\'s __init__.py'
                )
                continue
            for target in sorted(graph.find_modules_directly_imported_by(module)):
                other = layer(target) if target.split(".")[0] == root else None
                if other is not None and other not in may_import.get(own, ()):
                    problems.append(f"{module} ({own}) imports {target} ({other})")
                elif other is None and target.split(".")[0] in forbidden.get(own, ()):
                    problems.append(f"{module} ({own}) imports {target}, which the {own} layer may not")
            if own in (io_free or ()):
                problems += [
                    f"{module} ({own}) calls {call}(): the {own} layer does no I/O"
                    for call in sorted(io_calls(source_file(module)))
                ]
        ours_graph = {m: set(graph.find_modules_directly_imported_by(m)) for m in ours}
        problems += [f"import circle: {' <-> '.join(group)}" for group in cycles(ours_graph)]
        return ContractCheck(kept=not problems, metadata={"problems": problems})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for problem in check.metadata["problems"]:
            output.print_error(problem, bold=False)
