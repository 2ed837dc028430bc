"""A metastore with SASL on answers a client that does not authenticate -- a Thrift call
where the SASL handshake belongs -- with a TApplicationException saying SASL is required,
in the client's own protocol, and serves nothing to it; the ``hms-txn`` commands turn it
into one line (without it, a plain client read the SASL error frame as a Thrift message
and reported "Length exceeded max allowed: 16384000")."""

from __future__ import annotations

import pytest
from thrift.Thrift import TApplicationException

from hms_txn.cli import main
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_security import SASL_CONF, sasl_client
from tests.support.servers import client_for

REQUIRED = ("this metastore requires SASL (hive.metastore.sasl.enabled=true on the server): "
            "authenticate with SASL PLAIN (user and password) or DIGEST-MD5 (a Hive "
            "delegation token)")


@pytest.mark.parametrize("framed, compact", [(False, False), (True, False), (False, True)])
def test_a_plain_client_is_told_that_sasl_is_required(hms_factory, framed, compact):
    server = hms_factory(SASL_CONF)
    with pytest.raises(TApplicationException) as err:
        with client_for(server.port, framed=framed, compact=compact) as c:
            c.create_database(t.Database(name="sneaky"))
    assert (err.value.type, err.value.message) == (TApplicationException.INTERNAL_ERROR,
                                                   REQUIRED)
    authenticated = sasl_client(server.port, "alice", "s3cret")
    try:
        assert authenticated.get_all_databases() == ["default"]      # nothing was created
    finally:
        authenticated.close()


def test_the_commands_say_it_in_one_line(hms_factory, capsys):
    server = hms_factory(SASL_CONF)
    assert main(["show-transactions", "--uri", server.uri]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[-1] == f"hms-txn: the metastore failed the call: {REQUIRED}"
