"""docs/compatibility.md is what scripts/compat_doc.py generates from the code now.

The page lists every method of the IDL with what hms-txn answers; when a method is
implemented, removed from a service or declared anew, the page must be regenerated
(``python scripts/compat_doc.py``). The number of methods still answering "not
supported" is reported (as a warning and a test property), not asserted: issue 28's
remaining work takes it to zero.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import pytest

from hms_txn.wire.thrift_gen.fb303 import FacebookService
from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore

ROOT = Path(__file__).resolve().parents[2]


def _load_script():
    spec = importlib.util.spec_from_file_location("compat_doc", ROOT / "scripts" / "compat_doc.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def compat_doc():
    return _load_script()


@pytest.fixture(scope="module")
def generated(compat_doc) -> str:
    return compat_doc.render()


def _rows(text: str) -> dict[str, str]:
    """method -> its table row."""
    return {line.split("`")[1]: line for line in text.splitlines() if line.startswith("| `")}


def test_compatibility_doc_is_current(compat_doc, generated, record_property):
    committed = compat_doc.DOC.read_text() if compat_doc.DOC.exists() else ""
    counts = compat_doc.counts(generated)
    record_property("not_supported", counts[compat_doc.NOT_SUPPORTED])
    record_property("implemented", counts[compat_doc.IMPLEMENTED])
    warnings.warn(f"docs/compatibility.md: {counts[compat_doc.NOT_SUPPORTED]} methods answer "
                  f"\"not supported\", {counts[compat_doc.IMPLEMENTED]} are implemented",
                  stacklevel=1)
    stale = sorted(m for m, row in _rows(generated).items() if _rows(committed).get(m) != row)
    assert committed == generated, (
        f"docs/compatibility.md is out of date (rows that differ: {stale[:20]}): run "
        f"python scripts/compat_doc.py")


def test_every_method_has_exactly_one_row(generated):
    declared = {m for cls in (ThriftHiveMetastore.Iface, FacebookService.Iface)
                for m in vars(cls) if not m.startswith("_")}
    rows = [line.split("`")[1] for line in generated.splitlines() if line.startswith("| `")]
    assert len(rows) == len(set(rows))
    assert set(rows) == declared


def test_newer_methods_are_those_the_idl_header_lists(compat_doc):
    newer = {m.name for m in compat_doc.idl_methods() if m.newer}
    assert newer == {
        "alter_database_req", "alter_dataconnector_req", "append_partition_req",
        "create_database_req", "create_dataconnector_req", "drop_dataconnector_req",
        "drop_partition_req", "drop_table_req", "fetch_partition_names_req",
        "get_partitions_by_filter_req"}


def test_status_comes_from_the_service_classes(compat_doc, generated):
    rows = _rows(generated)
    # served by TxnService / the catalog service / fb303
    for method in ("open_txns", "get_table", "getVersion"):
        assert "| implemented |" in rows[method], rows[method]
    # a method no service defines is answered by DeclaredErrors with the exception it
    # declares ...
    assert compat_doc.unsupported_answer("create_resource_plan") == "MetaException"
    # ... or, when the method declares none, a TApplicationException
    assert "TApplicationException INTERNAL_ERROR" in compat_doc.unsupported_answer(
        "get_file_metadata")


def test_notes_are_tied_to_a_status(compat_doc, monkeypatch):
    monkeypatch.setitem(compat_doc.compat_notes.NOT_SUPPORTED, "open_txns", "x")
    with pytest.raises(SystemExit, match="revise the note"):
        compat_doc.note_of("open_txns", compat_doc.IMPLEMENTED)
