"""The repository explains itself: what the code cites lies inside it."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [
    p
    for folder in ("harness",)
    for p in (ROOT / folder).rglob("*")
    if p.suffix in (".py", ".md", ".yaml") and p.is_file()
]


def test_no_citation_points_outside_the_repository():
    offenders = [str(p.relative_to(ROOT)) for p in SOURCES if "SPEC.md" in p.read_text(encoding="utf-8")]
    assert SOURCES and not offenders


def test_every_cited_formula_section_exists():
    formulas = (ROOT / "docs" / "formulas.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^## (§\d+)", formulas, flags=re.M))
    assert sections == {f"§{i}" for i in range(1, 8)}
    cited = {m for p in SOURCES for m in re.findall(r"docs/formulas\.md (§\d+)", p.read_text(encoding="utf-8"))}
    assert cited and cited <= sections
    # every paper the code cites ("the LongPPL paper") has a row in the table of papers, and none is cited by a number
    papers = set(re.findall(r"^\| the (\w+) paper \|", formulas, flags=re.M))
    texts = [p.read_text(encoding="utf-8") for p in SOURCES]
    used = {m for text in texts for m in re.findall(r"\b[Tt]he ([A-Z][A-Za-z]+) paper\b", text)}
    assert papers == {"PIC", "LSM", "LongRecipe", "EPL", "LongPPL"} and used and used <= papers, used - papers
    assert not [m for text in texts for m in re.findall(r"\b[Pp]apers? \d{3}\b", text)]
