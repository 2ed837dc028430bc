#!/usr/bin/env python3
"""Generate docs/compatibility.md: every method of the metastore IDL and what hms-txn
answers to it, derived from the code.

    python scripts/compat_doc.py           # rewrite docs/compatibility.md
    python scripts/compat_doc.py --check   # exit 1 when it is out of date

A method is "implemented" when one of the service objects that make up a standalone
server's handler (``Metastore.handler()``, see ``hms_txn/service/handler.py``) defines
it; every other declared method is answered "not supported" by ``DeclaredErrors``
(``hms_txn/service/errors.py``), with the exception the method declares for it. The
families and the methods newer than Hive 4.0.x come from the comments of the service in
``idl/hive_metastore.thrift``; the notes from ``hms_txn/service/compat_notes.py``.
tests/hms_txn/test_compat_doc.py fails when the committed page differs from this output.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # this checkout's hms_txn, also when run as a script

from hms_txn.common import errors
from hms_txn.service import compat_notes
from hms_txn.service.errors import declared_exceptions, translate
from hms_txn.wire.thrift_gen.fb303 import FacebookService
from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore

IDL = ROOT / "idl" / "hive_metastore.thrift"
DOC = ROOT / "docs" / "compatibility.md"

IMPLEMENTED = "implemented"
NOT_SUPPORTED = "not supported"
NEWER_MARK = "newer than 4.0.x"

_SECTION = re.compile(r"^  // --- (.+)$")
_COMMENT = re.compile(r"^\s*//(.*)$")
# a declaration starts at two spaces: [oneway] <type> <name>(
_METHOD = re.compile(r"^  (?:oneway\s+)?[A-Za-z_][\w.]*(?:<.*?>)?\s+([A-Za-z_]\w*)\(")


@dataclass(frozen=True)
class Method:
    name: str
    family: str
    newer: bool  # declared although newer than Hive 4.0.x (see the IDL's header)


def idl_methods(text: str | None = None) -> list[Method]:
    """The service's methods in declaration order, with the family (the ``// ---``
    heading above them) and whether a ``newer than 4.0.x`` comment covers them (from the
    comment to the next blank line or heading)."""
    text = IDL.read_text() if text is None else text
    body = text[text.index("service ThriftHiveMetastore"):]
    family, newer, out = "", False, []
    for line in body.splitlines()[1:]:
        if line.strip() == "}":
            break
        heading = _SECTION.match(line)
        if heading:
            family, newer = heading.group(1).strip(), False
            continue
        comment = _COMMENT.match(line)
        if comment:
            newer = NEWER_MARK in comment.group(1)
            continue
        if not line.strip():
            newer = False
            continue
        found = _METHOD.match(line)
        if found:
            out.append(Method(found.group(1), family, newer))
    declared = {m for m in vars(ThriftHiveMetastore.Iface) if not m.startswith("_")}
    names = [m.name for m in out]
    if set(names) != declared or len(names) != len(declared):
        raise SystemExit(
            f"compat_doc.py: the methods read from {IDL.name} differ from the generated "
            f"code (only in the text: {sorted(set(names) - declared)}, only generated: "
            f"{sorted(declared - set(names))}); regenerate or fix the parser")
    return out


def fb303_methods() -> list[str]:
    return sorted(m for m in vars(FacebookService.Iface) if not m.startswith("_"))


def implemented_methods() -> set[str]:
    """Names the handler of a standalone server resolves to a service method."""
    from hms_txn.common.config import Config
    from hms_txn.server.metastore import Metastore

    logging.disable(logging.CRITICAL)
    try:
        with tempfile.TemporaryDirectory(prefix="compat-doc-") as data:
            ms = Metastore(Config({"hive.metastore.warehouse.dir": f"{data}/warehouse"}),
                           data_dir=data)
            try:
                handler = ms.handler()
                names = [m.name for m in idl_methods()] + fb303_methods()
                return {name for name in names if _resolves(handler, name)}
            finally:
                ms.close()
    finally:
        logging.disable(logging.NOTSET)


def _resolves(handler: object, name: str) -> bool:
    try:
        getattr(handler, name)
    except AttributeError:
        return False
    return True


def unsupported_answer(method: str) -> str:
    """What ``DeclaredErrors`` sends for a method no service defines."""
    declared = declared_exceptions(method) or ()
    answer = translate(errors.Unsupported(f"{method} is not supported by hms-txn"),
                       declared, method)
    if type(answer).__name__ == "TApplicationException":
        return "TApplicationException INTERNAL_ERROR (the method declares no exception)"
    return type(answer).__name__


def status_of(method: str, implemented: set[str]) -> str:
    return IMPLEMENTED if method in implemented else NOT_SUPPORTED


def note_of(method: str, status: str) -> str:
    """The note of ``method``; a note kept for the other status is an error."""
    tables = {IMPLEMENTED: compat_notes.IMPLEMENTED, NOT_SUPPORTED: compat_notes.NOT_SUPPORTED}
    for table_status, table in tables.items():
        if method in table and table_status != status:
            raise SystemExit(
                f"compat_doc.py: hms_txn/service/compat_notes.py has a note on {method} for "
                f"a method that is {table_status}, but it is {status} now: revise the note")
    return tables[status].get(method, "")


def _check_notes(methods: set[str]) -> None:
    unknown = (set(compat_notes.IMPLEMENTED) | set(compat_notes.NOT_SUPPORTED)) - methods
    if unknown:
        raise SystemExit(f"compat_doc.py: notes on methods the IDL does not declare: "
                         f"{sorted(unknown)}")


def _cell(method: str, status: str, newer: bool = False) -> str:
    shown = status if status == IMPLEMENTED else f"**{status}**: {unsupported_answer(method)}"
    name = f"`{method}`" + (f" ({NEWER_MARK})" if newer else "")
    note = note_of(method, status).replace("|", "\\|")
    return f"| {name} | {shown} | {note} |"


def render() -> str:
    methods = idl_methods()
    implemented = implemented_methods()
    fb303 = fb303_methods()
    _check_notes({m.name for m in methods} | set(fb303))

    statuses = {m.name: status_of(m.name, implemented) for m in methods}
    families: dict[str, list[Method]] = {}
    for m in methods:
        families.setdefault(m.family, []).append(m)
    total = len(methods)
    done = sum(s == IMPLEMENTED for s in statuses.values())
    newer = [m for m in methods if m.newer]
    newer_done = sum(statuses[m.name] == IMPLEMENTED for m in newer)

    header = (
        "# Compatibility with the Hive metastore API\n\n"
        "<!-- Generated by `python scripts/compat_doc.py` from the code; do not edit. "
        "tests/hms_txn/test_compat_doc.py fails when this page is out of date. -->\n\n"
        "Every method of the metastore service (`idl/hive_metastore.thrift`: Hive 4.0.x, "
        "plus the newer request-style methods its header lists) and what hms-txn answers.\n\n"
        f"* **{IMPLEMENTED}**: a service class of `hms_txn/service/` serves the call "
        "(its note says when the answer is fixed on purpose).\n"
        f"* **{NOT_SUPPORTED}**: no service defines it; the call is answered with the "
        "exception named, carrying \"`<method>` is not supported by hms-txn\" "
        "(`hms_txn/service/errors.py`). In extension mode (docs/extension-mode.md) such a "
        "call is forwarded to the upstream metastore unless it belongs to the transaction "
        "system.\n"
    )
    base, base_done = total - len(newer), done - newer_done
    out = [
        header,
        "| | methods | implemented | not supported |",
        "|---|---:|---:|---:|",
        f"| Hive 4.0.x | {base} | {base_done} | {base - base_done} |",
        f"| newer than 4.0.x | {len(newer)} | {newer_done} | {len(newer) - newer_done} |",
        f"| all | {total} | {done} | {total - done} |",
        "",
    ]
    for family, members in families.items():
        served = sum(statuses[m.name] == IMPLEMENTED for m in members)
        heading = re.sub(r"\s*\(.*\)$", "", family)  # the IDL's remark in parentheses
        out += [f"## {heading[:1].upper()}{heading[1:]}", "",
                f"{served} of {len(members)} implemented.", "",
                "| method | status | note |", "|---|---|---|"]
        out += [_cell(m.name, statuses[m.name], m.newer) for m in members]
        out.append("")
    out += ["## fb303 (the base service)", "", "| method | status | note |", "|---|---|---|"]
    out += [_cell(m, status_of(m, implemented)) for m in fb303]
    out.append("")
    return "\n".join(out)


def counts(text: str) -> dict[str, int]:
    """Methods per status in a rendered page (the ThriftHiveMetastore tables and fb303)."""
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    return {IMPLEMENTED: sum(f"| {IMPLEMENTED} |" in r for r in rows),
            NOT_SUPPORTED: sum(f"| **{NOT_SUPPORTED}**" in r for r in rows)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when docs/compatibility.md is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not DOC.exists() or DOC.read_text() != text:
            print(f"{DOC.relative_to(ROOT)} is out of date: run python scripts/compat_doc.py",
                  file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    c = counts(text)
    print(f"wrote {DOC.relative_to(ROOT)}: {c[IMPLEMENTED]} implemented, "
          f"{c[NOT_SUPPORTED]} not supported")
    return 0


if __name__ == "__main__":
    sys.exit(main())
