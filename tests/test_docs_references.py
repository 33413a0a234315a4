"""The operator docs cite only files an operator has.

Operators read README.md, docs/ and the plugins' READMEs from a clone; a
citation of a file that is not in the repository (a maintainer's notes, a
renamed module) leaves them without the evidence the text promises.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("plugins/*/README.md")])
CITED = re.compile(r"`([A-Za-z0-9_./-]+\.(?:md|py))`")


def _exists(doc: Path, name: str) -> bool:
    if "/" not in name and not name.endswith(".md"):
        return True  # a bare module name (`models.py`) is described, not located
    bases = (ROOT, doc.parent, doc.parent / "dranet_cloud")
    return any((base / name).exists() for base in bases)


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_cited_files_exist(doc: Path) -> None:
    missing = [n for n in CITED.findall(doc.read_text()) if not _exists(doc, n)]
    assert not missing, f"{doc.relative_to(ROOT)} cites files not in the repository: {missing}"


def test_server_extra_install_works_from_a_clone() -> None:
    """dranet-cloud is not on an index: the server doc must say the clone's form."""
    text = (ROOT / "docs" / "byodp-server.md").read_text()
    assert "pip install './[server]'" in text


# Built so that this file does not cite it either.
_OUTSIDE = re.compile(r"\b" + "REFERENCE" + r"(\.md|\s+section\b|\s+\")")


def test_code_and_docs_cite_no_document_outside_the_repository() -> None:
    """Facts are cited by their source (a DRANET PR or file, a Kubernetes file),
    never by the maintainers' notes, which a reader of the code does not have."""
    files = [
        *DOCS,
        *sorted(ROOT.glob("dranet_cloud/**/*.py")),
        *sorted(ROOT.glob("plugins/*/**/*.py")),
        *sorted(ROOT.glob("tests/**/*.py")),
        *sorted(ROOT.glob("benchmarks/**/*.py")),
    ]
    citing = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _OUTSIDE.search(line)
    ]
    assert len(files) > 100
    assert not citing, f"cite the DRANET PR or file (or the Kubernetes source) instead: {citing}"
