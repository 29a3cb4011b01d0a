"""Comments cite what a reader can open.

The design documents and the issue tracker behind this code are not in the
repository, so a comment that cites a section sign, a success criterion, a
functional requirement, an issue number or a spec file by name sends its reader
nowhere. A comment cites a page under ``docs/`` instead (``docs/state.md,
"Caps"``), or says the rule itself. This test greps the sources a reader opens
for such citations, naming ``file:line`` for each, and checks that every
``docs/`` page (and section) a comment or doc cites exists.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"

SUFFIXES = {".py", ".proto", ".sh", ".md", ".js", ".html", ".service"}  # and #! scripts
SKIP_DIRS = {".git", ".venv", "build", "__pycache__", "node_modules", ".pytest_cache",
             ".hypothesis"}
SKIP_PATHS = ("tests/data/", "tests/artifacts/")
SKIP_FILES = {"BENCHMARKS.md"}  # its history keeps the issue numbers it was written under

SECTION_SIGN = "\u00a7"
CITATION = re.compile(
    SECTION_SIGN
    + r"|\bSC-\d+|\bFR-\d+|\bissue\s+\d+"
    + r"|\b(?:narratoria-architecture|plan-generation-and-skills|protocol-data-model"
    + r"|skill-state-persistence|phantom-state-engine)\.md",
    re.IGNORECASE,
)
# docs/<page>.md, optionally with #anchor or , "Section"
DOCS_CITE = re.compile(r"docs/([A-Za-z0-9_-]+\.md)(?:#([A-Za-z0-9_-]+)|,\s*\"([^\"]+)\")?")
# Links between docs pages: [text](page.md#anchor)
DOCS_LINK = re.compile(r"\]\(([A-Za-z0-9_-]+\.md)(?:#([A-Za-z0-9_-]+))?\)")


def _sources() -> list[Path]:
    found = []
    for path in REPO.rglob("*"):
        rel = path.relative_to(REPO)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts):
            continue
        if not path.is_file() or rel.name in SKIP_FILES:
            continue
        if path.suffix not in SUFFIXES and not (path.suffix == "" and _is_script(path)):
            continue
        if rel.as_posix().startswith(SKIP_PATHS):
            continue
        found.append(path)
    return sorted(found)


def _is_script(path: Path) -> bool:
    """A skill's script is an executable without a suffix; it opens with ``#!``."""
    with path.open("rb") as f:
        return f.read(2) == b"#!"


def _lines(path: Path) -> list[str]:
    return path.read_text("utf-8", errors="replace").splitlines()


def _slug(heading: str) -> str:
    """A heading as its Markdown anchor: lower case, punctuation out, spaces as hyphens."""
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"\s", "-", text)


def _headings(page: Path) -> tuple[set[str], set[str]]:
    """(the page's headings as written, their anchors)."""
    titles = {m.group(1).strip() for m in re.finditer(r"^#{1,6}\s+(.+)$", page.read_text("utf-8"),
                                                      re.MULTILINE)}
    return titles, {_slug(t) for t in titles}


def test_no_citation_of_documents_outside_the_repository():
    hits = []
    for path in _sources():
        rel = path.relative_to(REPO).as_posix()
        for number, line in enumerate(_lines(path), 1):
            if CITATION.search(line):
                hits.append(f"{rel}:{number}: {line.strip()[:120]}")
    assert not hits, ("cite docs/<page>.md or say the rule itself:\n" + "\n".join(hits))


def _check(target: str, anchor: str | None, section: str | None, where: str, bad: list[str]):
    page = DOCS / target
    if not page.is_file():
        bad.append(f"{where}: docs/{target} does not exist")
        return
    titles, anchors = _headings(page)
    if anchor and anchor not in anchors:
        bad.append(f"{where}: docs/{target} has no section #{anchor}")
    if section and section not in titles:
        bad.append(f"{where}: docs/{target} has no section \"{section}\"")


def test_cited_docs_pages_and_sections_exist():
    bad: list[str] = []
    for path in _sources():
        rel = path.relative_to(REPO).as_posix()
        for number, line in enumerate(_lines(path), 1):
            for m in DOCS_CITE.finditer(line):
                _check(m.group(1), m.group(2), m.group(3), f"{rel}:{number}", bad)
            if rel.startswith("docs/"):
                for m in DOCS_LINK.finditer(line):
                    _check(m.group(1), m.group(2), None, f"{rel}:{number}", bad)
    assert not bad, "\n".join(bad)


def test_docs_index_lists_every_page():
    index = (DOCS / "README.md").read_text("utf-8")
    pages = sorted(p.name for p in DOCS.glob("*.md") if p.name != "README.md")
    assert pages, "docs/ has no pages"
    missing = [p for p in pages if f"({p})" not in index]
    assert not missing, f"docs/README.md does not link {missing}"
