"""How heavy the package is to read, counted from its source by the AST: ``python -m harness.devtools.house [--json]``.

Per file of ``harness/``: lines of code, of docstrings and of comment-only lines; docstrings over :data:`LONG_DOCSTRING`
lines; files importing lm-eval, and imports of its private modules; process-global state (``global``, module-level
mutable containers under lower-case names); and the lines of docs/ARCHITECTURE.md."""

from __future__ import annotations

import argparse
import ast
import io
import json
import tokenize
from dataclasses import asdict, dataclass, field
from pathlib import Path

LONG_DOCSTRING = 8
ROOT = Path(__file__).resolve().parents[2]
MUTABLE_CALLS = frozenset({"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "deque"})


@dataclass
class Counts:
    """What :func:`count` measures (module docstring)."""

    files: int = 0
    code: int = 0
    docstrings: int = 0
    comments: int = 0
    long_docstrings: int = 0
    lm_eval_files: list[str] = field(default_factory=list)
    private_lm_eval_imports: list[str] = field(default_factory=list)
    process_globals: list[str] = field(default_factory=list)
    architecture_lines: int = 0

    @property
    def lm_eval_folders(self) -> list[str]:
        return sorted({str(Path(f).parent.relative_to("harness")).split("/")[0] for f in self.lm_eval_files})


def _docstring_lines(tree: ast.Module) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    firsts = [
        n.body[0] for n in ast.walk(tree) if isinstance(n, kinds) and ast.get_docstring(n, clean=False) is not None
    ]
    return {line for first in firsts for line in range(first.lineno, (first.end_lineno or first.lineno) + 1)}


def _comment_lines(source: str) -> set[int]:
    """Lines that hold a comment and no code."""
    code_lines: set[int] = set()
    comment_lines: set[int] = set()
    ignored = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comment_lines.add(token.start[0])
        elif token.type not in ignored:
            code_lines.update(range(token.start[0], token.end[0] + 1))
    return comment_lines - code_lines


def _lm_eval_imports(tree: ast.Module) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names if alias.name.split(".")[0] == "lm_eval"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "lm_eval":
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def _process_globals(tree: ast.Module, where: str) -> list[str]:
    found = [f"{where}: global {', '.join(node.names)}" for node in ast.walk(tree) if isinstance(node, ast.Global)]
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        value = getattr(node, "value", None)
        mutable = isinstance(value, (ast.Dict, ast.List, ast.Set)) or (
            isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", "")) in MUTABLE_CALLS
        )
        for target in targets:
            if mutable and isinstance(target, ast.Name) and not target.id.isupper() and target.id != "__all__":
                found.append(f"{where}: {target.id}")
    return found


def count(root: Path = ROOT) -> Counts:
    """The counts of ``root``'s ``harness/`` package and docs/ARCHITECTURE.md."""
    out = Counts()
    for path in sorted((root / "harness").rglob("*.py")):
        where = str(path.relative_to(root))
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        docstrings, comments = _docstring_lines(tree), _comment_lines(source)
        blank = {i for i, line in enumerate(source.splitlines(), 1) if not line.strip()}
        total = len(source.splitlines())
        out.files += 1
        out.docstrings += len(docstrings)
        out.comments += len(comments - docstrings)
        out.code += total - len(blank | docstrings | comments)
        out.long_docstrings += sum(
            1
            for node in ast.walk(tree)
            if isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            and (node.end_lineno or node.lineno) - node.lineno + 1 > LONG_DOCSTRING
        )
        imports = _lm_eval_imports(tree)
        if imports:
            out.lm_eval_files.append(where)
        out.private_lm_eval_imports += [
            f"{where}: {name}"
            for name in imports
            if any(part.startswith("_") for part in name.split(".")[1:-1]) or name.split(".")[-1].startswith("_")
        ]
        out.process_globals += _process_globals(tree, where)
    architecture = root / "docs" / "ARCHITECTURE.md"
    out.architecture_lines = len(architecture.read_text(encoding="utf-8").splitlines()) if architecture.exists() else 0
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the counts as JSON, lists in full")
    args = parser.parse_args(argv)
    counts = count()
    if args.json:
        print(json.dumps({**asdict(counts), "lm_eval_folders": counts.lm_eval_folders}, indent=1))
        return 0
    print(
        f"files {counts.files}; lines of code {counts.code}, docstrings {counts.docstrings} "
        f"({counts.docstrings / max(1, counts.code):.0%} of the code; {counts.long_docstrings} longer than "
        f"{LONG_DOCSTRING} lines), comments {counts.comments}"
    )
    print(
        f"lm-eval imported by {len(counts.lm_eval_files)} files in {len(counts.lm_eval_folders)} folders "
        f"({', '.join(counts.lm_eval_folders)}); {len(counts.private_lm_eval_imports)} imports of private modules"
    )
    print(
        f"process-global state: {len(counts.process_globals)}; docs/ARCHITECTURE.md: {counts.architecture_lines} lines"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
