#!/usr/bin/env python3
"""Every relative link of README.md and docs/*.md points somewhere: the file (or folder) exists
in the repository, and a #fragment names a heading of the target page, as GitHub makes its
anchors. README.md is at most README_MAX_LINES long, and its first 60 lines hold the two commands.

    doc_links.py REPO_ROOT            exit 0, or 1 listing each broken link as FILE:LINE: ...
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

README_MAX_LINES = 250
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*)$")
FENCE = re.compile(r"^\s*(```|~~~)")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, spaces as
    '-' ('Micro-benchmarks and the machine's peak' -> 'micro-benchmarks-and-the-machines-peak')."""
    text = re.sub(r"[`*_]{1,2}([^`*_]+)[`*_]{1,2}", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def prose_lines(path: Path):
    """(line number, line) of a Markdown file outside its fenced code blocks."""
    fenced = False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line


def anchors(path: Path) -> set[str]:
    found = set()
    for _, line in prose_lines(path):
        m = HEADING.match(line)
        if m:
            found.add(anchor(m.group(1)))
    return found


def broken_links(page: Path, root: Path) -> list[str]:
    problems = []
    for n, line in prose_lines(page):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path_part, _, fragment = target.partition("#")
            dest = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(root)}:{n}: {target}"
            if root not in dest.parents and dest != root:
                problems.append(f"{where}: outside the repository")
            elif not dest.exists():
                problems.append(f"{where}: {path_part} does not exist")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                problems.append(f"{where}: no heading #{fragment} in {dest.relative_to(root)}")
    return problems


def readme_problems(readme: Path) -> list[str]:
    lines = readme.read_text(encoding="utf-8").splitlines()
    problems = []
    if len(lines) > README_MAX_LINES:
        problems.append(f"README.md: {len(lines)} lines, more than {README_MAX_LINES}; "
                        "move the detail to docs/")
    head = "\n".join(lines[:60])
    for command in ("scripts/dlbench --suite=scaling", "scripts/test.sh"):
        if command not in head:
            problems.append(f"README.md: '{command}' is not in its first 60 lines")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: doc_links.py REPO_ROOT", file=sys.stderr)
        return 2
    root = Path(argv[1]).resolve()
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    problems = readme_problems(root / "README.md")
    for page in pages:
        problems += broken_links(page, root)
    for p in problems:
        print(p)
    print(f"doc_links: {len(pages)} pages, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
