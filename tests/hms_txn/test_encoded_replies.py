"""Replies written from pre-encoded partitions (hms_txn/handler/encoded.py) are byte for
byte what the generic encoder writes, and every transport/protocol gets the same answer."""

from __future__ import annotations

import pytest
from thrift.protocol import fastbinary

from hms_txn.wire.encoded import EncodedStructs, _encode, encode
from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore as TH
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import make_sd, make_table
from tests.support.servers import client_for


def _partitions(n: int) -> list[t.Partition]:
    return [t.Partition(values=[str(i), f"h{i % 3}"], dbName="d", tableName="p", createTime=i,
                        lastAccessTime=0, sd=make_sd((("id", "int"),), f"file:/w/p={i}"),
                        parameters={"k": "v" * (i % 5)}) for i in range(n)]


@pytest.mark.parametrize("n", [0, 1, 1000])
def test_encoded_result_matches_the_generic_encoder(n):
    parts = _partitions(n)
    plain = TH.get_partitions_by_names_result(success=parts)
    fast = TH.get_partitions_by_names_result(
        success=EncodedStructs(parts, [encode(p) for p in parts]))
    spec = [plain.__class__, plain.thrift_spec]
    assert _encode(fast, spec) == fastbinary.encode_binary(plain, spec)


def test_a_result_carrying_an_exception_is_encoded_generically():
    result = TH.get_partitions_by_names_result(
        success=EncodedStructs([], []), o1=t.MetaException(message="boom"))
    spec = [result.__class__, result.thrift_spec]
    assert _encode(result, spec) == fastbinary.encode_binary(result, spec)


@pytest.mark.parametrize("framed, compact", [(False, False), (True, False), (False, True)])
def test_cached_partitions_by_names_over_every_protocol(hms_factory, framed, compact):
    server = hms_factory({"hive.metastore.thrift.framed.transport.enabled": str(framed).lower(),
                          "hive.metastore.thrift.compact.protocol.enabled": str(compact).lower()})
    with client_for(server.port, framed=framed, compact=compact) as c:
        c.create_database(t.Database(name="d"))
        c.create_table(make_table("d", "p", keys=(("ds", "string"),)))
        table = c.get_table("d", "p")
        c.add_partitions([t.Partition(values=[str(i)], dbName="d", tableName="p", sd=table.sd)
                          for i in range(50)])
        names = [f"ds={i}" for i in (7, 3, 49, 0)]
        expected = [c.get_partition("d", "p", [n.split("=")[1]]) for n in names]
        for _ in range(3):   # cold, then answered from the cache with stored encodings
            got = c.get_partitions_by_names("d", "p", names)
            assert sorted(got, key=lambda p: p.values) == sorted(expected, key=lambda p: p.values)
