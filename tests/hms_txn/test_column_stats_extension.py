"""Column statistics in extension mode (docs/extension-mode.md): the upstream metastore owns
them. Every statistics call is forwarded; the write state of a request (``writeId``,
``validWriteIdList``: our write ids) is taken out first, and a write drops the table from
our metadata cache (its COLUMN_STATS_ACCURATE changed upstream). The fallback of the
``_req`` writes to an upstream without them is in test_column_stats_differential.py (Hive
2.3)."""

from __future__ import annotations

import os

import pytest

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.hms_txn.stats_support import Writer, accurate, by_name, col_stats, longs
from tests.hms_txn.test_catalog import make_table
from tests.support.servers import InProcessServer


def _server(root, name: str, conf: dict) -> InProcessServer:
    base = os.path.join(str(root), name)
    return InProcessServer(os.path.join(base, "data"), {
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{base}/metastore.sqlite",
        "hive.metastore.warehouse.dir": os.path.join(base, "warehouse"), **conf})


@pytest.fixture
def pair(tmp_path):
    upstream = _server(tmp_path, "upstream", {})
    ext = _server(tmp_path, "ext", {"hms_txn.upstream.uris": upstream.uri,
                                    "hms_txn.upstream.cache.ttl": "1h"})
    yield upstream, ext
    ext.stop()
    upstream.stop()


def test_statistics_are_forwarded_without_our_write_state(pair):
    upstream, ext = pair
    c, u = ext.client(), upstream.client()
    c.create_table(make_table("default", "acid", params={"transactional": "true"}))
    assert "COLUMN_STATS_ACCURATE" not in c.get_table_acid_aware("default", "acid").parameters   # cached
    w = Writer(c, "default", "acid")          # our transaction, our write id
    assert c.update_table_column_statistics_req(T.SetPartitionsStatsRequest(
        colStats=[col_stats("default", "acid", [("id", "int", longs(1, 9, 0, 9))])],
        writeId=w.write_id, validWriteIdList=w.valid_write_ids, engine="hive")).result
    # the upstream got no write state: its table keeps no write id of ours
    assert u.get_table_acid_aware("default", "acid").writeId == -1
    # our cache dropped the table: the new COLUMN_STATS_ACCURATE is read through us
    assert accurate(c.get_table_acid_aware("default", "acid").parameters) == {"COLUMN_STATS": {"id": "true"}}
    got = c.get_table_statistics_req(T.TableStatsRequest(
        dbName="default", tblName="acid", colNames=["id"], engine="hive",
        validWriteIdList=w.valid_write_ids)).tableStats
    assert by_name(got)["id"].highValue == 9
    assert c.set_aggr_stats_for(T.SetPartitionsStatsRequest(
        colStats=[col_stats("default", "acid", [("id", "int", longs(1, 5, 0, 5))])],
        writeId=w.write_id, validWriteIdList=w.valid_write_ids, engine="hive"))
    assert by_name(u.get_table_statistics_req(T.TableStatsRequest(
        dbName="default", tblName="acid", colNames=["id"], engine="hive")).tableStats)["id"].highValue == 5
    w.commit()
    # deletes are forwarded too (and refused upstream on a transactional table, as Hive does)
    with pytest.raises(T.MetaException, match="transactional"):
        c.delete_table_column_statistics("default", "acid", "id", None)
    c.create_table(make_table("default", "plain"))
    c.update_table_column_statistics(col_stats("default", "plain", [("id", "int", longs(1, 2, 0, 2))]))
    assert accurate(c.get_table_acid_aware("default", "plain").parameters) == {"COLUMN_STATS": {"id": "true"}}
    assert c.delete_table_column_statistics("default", "plain", "id", None)
    assert accurate(c.get_table_acid_aware("default", "plain").parameters) == {}
