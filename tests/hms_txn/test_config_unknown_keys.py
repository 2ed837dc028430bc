"""Issue 30: a typo in one of our own ``hms_txn.*`` keys is not silently ignored: it logs a
warning naming the closest known key. Hive's own keys and other namespaces stay quiet
(hive-site.xml files carry many keys hms-txn does not use)."""

from __future__ import annotations

import logging

from hms_bench.servers import write_site_xml
from hms_txn.common.config import Config, load


def test_unknown_own_key_warns_with_the_closest_known_key(caplog):
    with caplog.at_level(logging.WARNING, logger="hms_txn.common.config"):
        config = Config({"hms_txn.cache.enabeld": "false", "hms_txn.zzz": "1",
                         "hive.exec.dynamic.partition": "true", "fs.defaultFS": "file:///"},
                        source="site.xml")
    assert [r.getMessage() for r in caplog.records] == [
        "site.xml: unknown key hms_txn.cache.enabeld is ignored; did you mean "
        "hms_txn.cache.enabled?",
        "site.xml: unknown key hms_txn.zzz is ignored"]
    assert config["hms_txn.cache.enabled"] is True          # the typo changed nothing


def test_a_typo_in_a_site_file_is_reported_with_its_path(tmp_path, caplog):
    site = write_site_xml(str(tmp_path / "hive-site.xml"), {"hms_txn.sqlite.synchronus": "NORMAL"})
    with caplog.at_level(logging.WARNING, logger="hms_txn.common.config"):
        load(site, {})
    [record] = caplog.records
    assert record.getMessage().endswith(
        "unknown key hms_txn.sqlite.synchronus is ignored; did you mean "
        "hms_txn.sqlite.synchronous?")
    assert "hive-site.xml" in record.getMessage()
