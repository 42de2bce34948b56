#!/usr/bin/env bash
# Every reference to a document resolves. Scans README.md, docs/ (results included) and the
# sources (src, include, tools, python, tests, scripts, cmake, bench, examples and the top-level
# build files) for
#   - a path ending in .md whose first folder is one of the repository's (docs/..., tests/...):
#     the file must exist;
#   - a bare upper-case name such as README.md: it must exist at the top level (or beside the
#     file that names it);
#   - a name ending in .md followed by a section sign and a number (also the bare word DESIGN):
#     the file must exist and have a heading numbered so;
#   - a path followed by a quoted section title (after a comma, a space or " ("): the title
#     must be a heading (#, ##, ###, ...) of that file, or the start of one up to a word boundary
#     ("Threads" names "Threads and fork()"); case, backticks and emphasis are ignored.
# A citation may wrap across comment lines: comment markers at the start of a line are dropped
# and the lines joined before matching. Paths with a glob or a placeholder (*, <...>) are not
# references. Prints FILE:LINE and what is wrong for each failure.
# Usage: tests/docs_references_test.sh [REPOSITORY_ROOT]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
exec python3 - <<'PY'
import os
import re
import subprocess
import sys

ROOTS = ["README.md", "docs", "src", "include", "tools", "python", "tests", "scripts", "cmake",
         "bench", "examples", "CMakeLists.txt", "Makefile", "CMakePresets.json"]
TEXT_SUFFIXES = (".md", ".cpp", ".hpp", ".h", ".c", ".cc", ".cu", ".cuh", ".py", ".pyi", ".sh",
                 ".cmake", ".txt", ".in", ".toml", ".cfg", ".json", ".pml", ".yml", ".yaml")
TEXT_NAMES = ("Makefile", "CMakeLists.txt")


def candidate_files():
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                              "--"] + ROOTS, capture_output=True, text=True, check=True).stdout
        files = out.splitlines()
    except (OSError, subprocess.CalledProcessError):
        files = []
        for root in ROOTS:
            if os.path.isfile(root):
                files.append(root)
            for d, subdirs, names in os.walk(root):
                subdirs[:] = [s for s in subdirs if not s.startswith(".") and s != "__pycache__"]
                files += [os.path.join(d, n) for n in names]
    keep = []
    for f in sorted(set(files)):
        parts = f.split("/")
        if any(p.startswith(".venv") or p == "__pycache__" for p in parts):
            continue
        if not os.path.isfile(f):
            continue  # deleted in the work tree, not yet in the index
        if f.endswith(TEXT_SUFFIXES) or parts[-1] in TEXT_NAMES:
            keep.append(f)
    return keep


def normalise(title):
    title = re.sub(r"[`*_]", "", title)
    return re.sub(r"\s+", " ", title).strip().lower()


HEADINGS = {}


def headings_of(path):
    if path not in HEADINGS:
        found, fence = [], False
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("```"):
                    fence = not fence
                elif not fence and re.match(r"#{1,6}\s", line):
                    found.append(normalise(line.lstrip("#")))
        HEADINGS[path] = found
    return HEADINGS[path]


def title_matches(path, title):
    want = normalise(title)
    for h in headings_of(path):
        if h == want or (h.startswith(want) and not h[len(want)].isalnum()):
            return True
    return False


def numbered_heading(path, number):
    return any(re.match(re.escape(number) + r"[. )]", h) for h in headings_of(path))


def resolve(name, citing):
    """The existing file a cited name stands for, or None."""
    if "/" in name:
        return name if os.path.isfile(name) else None
    for d in (".", os.path.dirname(citing)):
        p = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(p):
            return p
    return None


# A line's text without the comment marker that opens it, so that wrapped citations join up.
COMMENT = re.compile(r"^\s*(?://+|/\*+|\*+/?|#+|--|;+)?\s?")
PATH = r"(?<![\w./<>*$-])((?:[\w-]+/)*[\w-]+\.md)\b"
TITLE = r"(?:,\s*|\s+\(?)(?:sections?\s+)?\\?[\"\u201c]([^\"\u201d\\]{1,120})\\?[\"\u201d]"
SECTION_SIGN = r"\s*\u00a7\s*(\d+)"
CITE = re.compile(PATH + r"(?:" + TITLE + r"|" + SECTION_SIGN + r")?")
DESIGN_WORD = re.compile(r"(?<![\w.])DESIGN(?!\.md)" + SECTION_SIGN)


def joined(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    text, starts = [], []
    pos = 0
    for line in lines:
        piece = line if path.endswith(".md") else COMMENT.sub("", line, count=1)
        starts.append(pos)
        text.append(piece)
        pos += len(piece) + 1
    return " ".join(text), starts


def line_of(starts, offset):
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo + 1


failures = []
checked = 0
for path in candidate_files():
    text, starts = joined(path)
    for m in CITE.finditer(text):
        name, title, number = m.group(1), m.group(2), m.group(3)
        if "/" in name and not os.path.isdir(name.split("/")[0]):
            continue  # a placeholder folder (OUT/...), not the repository's
        if "/" not in name and not (name[0].isupper() or number):
            continue  # a lower-case file name (an output such as table.md), not a document
        checked += 1
        where = f"{path}:{line_of(starts, m.start())}"
        target = resolve(name, path)
        if target is None:
            failures.append(f"{where}: {name} does not exist")
        elif title is not None and target.endswith(".md") and not title_matches(target, title):
            failures.append(f'{where}: {name} has no heading "{title.strip()}"')
        elif number is not None and not numbered_heading(target, number):
            failures.append(f"{where}: {name} has no section {number}")
    for m in DESIGN_WORD.finditer(text):
        checked += 1
        failures.append(f"{path}:{line_of(starts, m.start())}: DESIGN, a document that does not exist")

for f in failures:
    print(f)
if checked < 100:
    print(f"only {checked} references found: is the scan working?")
    sys.exit(1)
print(f"docs references: {checked} checked, {len(failures)} unresolved")
sys.exit(1 if failures else 0)
PY
