"""The package's layers and the imports between them: ``python -m harness.devtools.layers`` prints the layer graph
as the code has it and exits 1 on a forbidden import, a module without a layer or an import circle. The rules are
docs/ARCHITECTURE.md's "Layers": a module's layer is its own ``LAYER``, else its packages', else its folder's
(:data:`LAYERS`); imports count wherever written, but not under ``if TYPE_CHECKING:``."""

from __future__ import annotations

import ast
import functools
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Layer:
    name: str
    packages: tuple[str, ...]
    may_import: tuple[str, ...]
    forbidden_libraries: tuple[str, ...] = ()


# each folder's layer, unless a module declares another; concept folders (pic, train ...) declare their own
LAYERS = (
    Layer("base", ("harness.core",), ()),
    Layer("pure", ("harness.metrics",), ("base",),
          ("transformers", "lm_eval", "datasets", "peft", "accelerate", "openai", "huggingface_hub", "os",
           "pathlib", "urllib", "shutil", "tempfile", "subprocess")),
    Layer("data", ("harness.data",), ("base", "pure"), ("lm_eval", "peft", "accelerate", "openai")),
    Layer("models", ("harness.models",), ("base", "pure", "data"), ("lm_eval", "openai")),
    Layer("judging", ("harness.judges",), ("base", "pure", "data"), ("lm_eval", "torch", "transformers")),
    Layer("lmeval", ("harness.plugin", "harness.engines", "harness.tasks"), ("base", "pure", "data", "models", "judging")),
    Layer("reporting", ("harness.reporting",), ("base", "pure", "data"), ("lm_eval", "torch", "transformers")),
    Layer("app", ("harness.cli", "harness.demo", "harness.devtools", "harness"),
          ("base", "pure", "data", "models", "judging", "lmeval", "reporting")),
)
ROOT_PACKAGE = "harness"  # its own layer is app's; it gives none to the folders under it
BY_NAME = {layer.name: layer for layer in LAYERS}
_FOLDER_LAYERS = {package: layer for layer in LAYERS for package in layer.packages}
FLOORS = ("core", "metrics", "data", "models")  # the shared floors: they import no other folder of the package
# folder circles that stand, and why ({frozenset of folders: reason}); none does
FOLDER_CIRCLES: dict[frozenset[str], str] = {}
# Calls that read or write files: none may appear in the pure layer.
IO_CALLS = frozenset({"open", "read_text", "write_text", "read_bytes", "write_bytes", "urlopen"})
# Source folders of the installed packages: the source tree is the import tree.
SOURCES = {"harness": "harness"}


def declared_layer(path: Path) -> str | None:
    """The layer a source file declares at its top level (``LAYER = "data"``), None when it declares none."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "LAYER" and isinstance(node.value, ast.Constant)):
            return node.value.value
    return None


def declared_layers(root: Path) -> dict[str, str]:
    """``{module: layer}`` of the modules and packages under the repository ``root`` that declare one."""
    found = {module: declared_layer(path) for module, path in module_files(root).items()}
    return {module: name for module, name in found.items() if name is not None}


@functools.lru_cache(maxsize=1)
def _this_tree() -> dict[str, str]:
    """This checkout's declarations, read once."""
    return declared_layers(Path(__file__).resolve().parents[2])


def layer_of(module: str, declared: dict[str, str] | None = None) -> Layer | None:
    """The layer of a ``harness`` module: the nearest of itself and its packages upwards that declares one
    (``declared``: this checkout's by default) or is a layer's folder; None for others and for one of ours with none."""
    if declared is None:
        declared = _this_tree()
    parts = module.split(".")
    if parts[0] != ROOT_PACKAGE:
        return None
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix == ROOT_PACKAGE and module != ROOT_PACKAGE:
            return None
        if prefix in declared:
            if declared[prefix] not in BY_NAME:
                raise ValueError(f"{prefix} declares LAYER = {declared[prefix]!r}; layers: {', '.join(BY_NAME)}")
            return BY_NAME[declared[prefix]]
        if prefix in _FOLDER_LAYERS:
            return _FOLDER_LAYERS[prefix]
    return None


def module_files(root: Path) -> dict[str, Path]:
    """``{module name: file}`` of every module of the installed packages under the repository ``root``."""
    out: dict[str, Path] = {}
    for package, folder in SOURCES.items():
        base = root / folder
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): imports for type checkers only, never run."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(module: str, path: Path) -> tuple[set[str], set[str]]:
    """``(imported modules, names of I/O calls)`` of one source file; ``from x import y`` counts ``x.y``
    when that is a module of ours (else ``x``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    calls: set[str] = set()
    typing_only = {id(n) for block in ast.walk(tree) if _is_type_checking(block) for stmt in block.body
                   for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node, path.name == "__init__.py")
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names if target.startswith("harness"))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name in IO_CALLS:
                calls.add(name)
    return found, calls


def violations(graph: dict[str, set[str]], io_calls: dict[str, set[str]] | None = None,
               declared: dict[str, str] | None = None) -> list[str]:
    """One line per module of ours with no layer, per import a module's layer may not make and per I/O call in the
    pure layer (``declared``: the modules' ``LAYER`` declarations, this checkout's by default)."""
    out = []
    tree = _this_tree() if declared is None else declared
    for module in sorted(m for m in tree if m in graph):
        if layer_of(module, {k: v for k, v in tree.items() if k != module}) is BY_NAME.get(tree[module]):
            out.append(f"{module} declares LAYER = {tree[module]!r}, the layer it has without it: remove the line")
    for module, targets in sorted(graph.items()):
        layer = layer_of(module, declared)
        if layer is None:
            if module.startswith(ROOT_PACKAGE + "."):
                out.append(f"{module} has no layer: declare LAYER = \"<layer>\" in it or in its package's __init__.py")
            continue
        for target in sorted(targets):
            other = layer_of(target, declared)
            if other is not None:
                if other.name != layer.name and other.name not in layer.may_import:
                    out.append(f"{module} ({layer.name}) imports {target} ({other.name})")
            elif target.split(".")[0] in layer.forbidden_libraries:
                out.append(f"{module} ({layer.name}) imports {target}, which the {layer.name} layer may not")
        for call in sorted((io_calls or {}).get(module, ())):
            if layer.name == "pure":
                out.append(f"{module} (pure) calls {call}(): the pure layer does no I/O")
    return out


def layer_edges(graph: dict[str, set[str]], declared: dict[str, str] | None = None) -> dict[tuple[str, str], int]:
    """``{(layer, imported layer): number of module imports}`` between different layers."""
    pairs = ((layer_of(module, declared), layer_of(target, declared)) for module, targets in graph.items()
             for target in targets)
    return Counter((src.name, dst.name) for src, dst in pairs if src and dst and src.name != dst.name)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: groups of two or more of our modules that reach each other (strongly connected
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


def folder_of(module: str) -> str | None:
    """The folder of a ``harness`` module (``harness.pic.hf.hooks`` -> ``pic``); None for ``harness`` and others."""
    parts = module.split(".")
    return parts[1] if parts[0] == "harness" and len(parts) >= 2 else None


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``{folder: the other folders its modules import}`` of the package."""
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        src = folder_of(module)
        if src is not None:
            out.setdefault(src, set()).update({folder_of(target) for target in targets} - {None, src})
    return out


def folder_problems(graph: dict[str, set[str]]) -> list[str]:
    """A floor importing another folder, each folder circle not declared in :data:`FOLDER_CIRCLES`, and each declared
    one whose folders all exist but no longer circle."""
    out = []
    for module, targets in sorted(graph.items()):
        src = folder_of(module)
        if src in FLOORS:
            for target in sorted(targets):
                dst = folder_of(target)
                if dst is not None and dst != src and dst not in FLOORS:
                    out.append(f"{module} (floor {src}) imports {target} (folder {dst}): a floor imports no concept")
    folders = folder_graph(graph)
    found = {frozenset(group) for group in cycles(folders)}
    for group in sorted(found - set(FOLDER_CIRCLES), key=sorted):
        out.append(f"folder circle: {' <-> '.join(sorted(group))} (break it, or declare it in FOLDER_CIRCLES with why)")
    for group in sorted(g for g in set(FOLDER_CIRCLES) - found if g <= set(folders)):  # (a tree without them: a test's)
        out.append(f"declared folder circle {' <-> '.join(sorted(group))} no longer stands: take it out of FOLDER_CIRCLES")
    return out


def check(root: Path) -> tuple[dict[str, set[str]], list[str]]:
    """The import graph of the repository at ``root`` and its violations (layers, pure-layer I/O, circles, folders)."""
    files = module_files(root)
    graph: dict[str, set[str]] = {}  # {module: the harness modules and top-level libraries it imports}
    io_calls: dict[str, set[str]] = {}
    for module, path in files.items():
        found, io_calls[module] = imports_of(module, path)
        libraries = {m.split(".")[0] for m in found if not m.startswith("harness")}
        graph[module] = {m for m in found if m in files} | libraries
    circles = [f"import circle: {' <-> '.join(group)}" for group in cycles(graph)]
    return graph, violations(graph, io_calls, declared_layers(root)) + circles + folder_problems(graph)


def rules() -> list[str]:
    """One line per layer: ``name: folders -> layers it may import`` (docs/ARCHITECTURE.md quotes these)."""
    return [f"{layer.name}: {', '.join(layer.packages)} -> {', '.join(layer.may_import) or '(nothing)'}"
            for layer in LAYERS]


def render(graph: dict[str, set[str]], problems: list[str], declared: dict[str, str]) -> str:
    """As text: the rules, the modules that declare their layer, the imports between layers, the violations."""
    edges = layer_edges(graph, declared)
    lines = ["Layers (name: folders -> may import):", *(f"  {line}" for line in rules()), "",
             "Declared in the module or its package (LAYER = ...):"]
    for layer in LAYERS:
        names = sorted(m for m, name in declared.items() if name == layer.name)
        if names:
            lines.append(f"  {layer.name}: {', '.join(names)}")
    lines += ["", "Imports found (layer -> imported layer: module imports):"]
    for layer in LAYERS:
        found = ", ".join(f"{dst} {n}" for (src, dst), n in sorted(edges.items()) if src == layer.name)
        lines.append(f"  {layer.name} -> {found or '(none)'}")
    lines.append("")
    lines.append(f"{len(graph)} modules; " + ("no violations" if not problems else f"{len(problems)} violations:"))
    lines.extend(f"  {p}" for p in problems)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    root = Path(argv[0]) if argv else Path(__file__).resolve().parents[2]
    graph, problems = check(root)
    print(render(graph, problems, declared_layers(root)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
