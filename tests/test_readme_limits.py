"""The README's "What it does not do" names every method docs/compatibility.md lists as
"not supported" (tests/hms_txn/test_compat_doc.py keeps that page current), and no other:
the README cannot fall behind the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_lists_exactly_the_methods_answered_not_supported():
    compat = (ROOT / "docs" / "compatibility.md").read_text()
    unsupported = set(re.findall(r"^\| `(\w+)`[^|]*\| \*\*not supported\*\*", compat, re.M))
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## What it does not do\n", 1)[1].split("\n## ", 1)[0]
    listed = section.split('**Methods answered "not supported".**', 1)[1]
    listed = listed.split("**Features without an implementation**", 1)[0]
    bullets = "\n".join(line for line in listed.splitlines() if line.startswith(("* ", "  ")))
    named = set(re.findall(r"`(\w+)`", bullets))
    assert named == unsupported, (
        f"README lacks {sorted(unsupported - named)}; lists as unsupported "
        f"{sorted(named - unsupported)}")
