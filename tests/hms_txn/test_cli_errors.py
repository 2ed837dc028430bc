"""Issue 30: every ``hms-txn`` command ends a bad argument, an unusable configuration, an
unreachable server or database and an error the server answered with exactly one line
``hms-txn: <what went wrong>`` on standard error and exit status 2 -- never a traceback --
and changes nothing on the server.

Table-driven: each case is the command line, the exact line and the status. The commands
run in this process (``hms_txn.cli.main``, what the console script runs); the servers they
talk to are ``hms-txn serve`` child processes, so standard error holds the command's output
only. After each case the server's whole visible state (databases, tables, transactions,
locks, compactions, the notification log's position) is what it was before.
"""

from __future__ import annotations

import os

import pytest

from hms_txn.cli import main
from hms_txn.cli.errors import explain
from hms_txn.wire.client import table_request
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import make_table
from tests.support.certs import make_certs
from tests.support.servers import ServerProcess

SUPPORTED = ("supported: SQLite (jdbc:sqlite:/path, sqlite:///path) and PostgreSQL "
             "(jdbc:postgresql://host:port/db, postgresql://...)")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A server with a database, a table, an open transaction and its lock; a server that
    serves TLS only; one whose only connection slot is taken; and files for the cases."""
    root = tmp_path_factory.mktemp("cli-errors")
    certs = make_certs(str(root / "certs"))
    main_server = ServerProcess(str(root / "main"))
    tls_server = ServerProcess(str(root / "tls"), {
        "hive.metastore.use.SSL": "true", "hive.metastore.keystore.path": certs.server})
    full_server = ServerProcess(str(root / "full"), {"hive.metastore.server.max.threads": "1",
                                                     "hms_txn.server.txn.loop": "false"})
    c = main_server.client()
    c.create_database(t.Database(name="shop", parameters={}))
    c.create_table(make_table("shop", "orders", cols=(("id", "int"),),
                              params={"transactional": "true"}))
    [txn] = c.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids
    c.lock(t.LockRequest(component=[t.LockComponent(type=2, level=2, dbname="shop",
                                                    tablename="orders")],
                         txnid=txn, user="u", hostname="h"))
    holder = full_server.client()
    holder.get_all_databases()                   # takes the only slot
    (root / "a-file").write_text("x")
    (root / "pw").write_text("secret\n")
    (root / "not-credentials").write_bytes(b"garbage")
    values = {"URI": main_server.uri, "TLS_URI": tls_server.uri, "FULL_URI": full_server.uri,
              "PORT": str(main_server.port), "ROOT": str(root)}
    yield values, c
    holder.close()
    c.close()
    for server in (main_server, tls_server, full_server):
        server.stop()


def server_state(c) -> dict:
    state = {"event": c.get_current_notificationEventId().eventId, "dbs": {}}
    for db in c.get_all_databases():
        state["dbs"][db] = {name: repr(c.get_table_req(table_request(db, name)).table)
                            for name in c.get_all_tables(db)}
    state["txns"] = [(i.id, i.state) for i in c.get_open_txns_info().open_txns]
    state["locks"] = [(e.lockid, e.state) for e in c.show_locks(t.ShowLocksRequest()).locks]
    state["compactions"] = [(e.id, e.state) for e in c.show_compact(t.ShowCompactRequest()).compacts
                            or []]
    return state


CONNECT_REFUSED = ("cannot connect to thrift://127.0.0.1:1: Could not connect to any of "
                   "[('127.0.0.1', 1)] ([Errno 111] Connection refused)")
REQUIRES_TLS = ("this metastore accepts TLS connections only (hive.metastore.use.SSL=true on "
                "the server): connect with TLS")

# (command line, the one line after "hms-txn: ", exit status); {URI}, {ROOT}, ... filled in
CASES = [
    (["--log-level", "bogus", "show-locks"],
     "argument --log-level: not a log level: 'bogus' (use one of DEBUG, INFO, WARNING, ERROR, "
     "CRITICAL) (see hms-txn --help)", 2),
    (["serve", "--port", "70000"],
     "argument --port: not a TCP port: '70000' (0-65535) (see hms-txn serve --help)", 2),
    (["show-locks", "--uri", "thrift://h:abc"],
     "argument --uri: not a thrift://host:port URI: 'thrift://h:abc' (bad port) "
     "(see hms-txn show-locks --help)", 2),
    (["show-transactions", "--hiveconf", "foo", "--uri", "{URI}"],
     "argument --hiveconf: takes KEY=VALUE, not 'foo' (see hms-txn show-transactions --help)", 2),
    (["upgrade-schema", "--hiveconf", "foo"],
     "argument --hiveconf: takes KEY=VALUE, not 'foo' (see hms-txn upgrade-schema --help)", 2),
    (["abort-txns", "x", "--uri", "{URI}"],
     "argument ID: invalid int value: 'x' (see hms-txn abort-txns --help)", 2),
    (["abort-txns", "1", "--uri", "{URI}", "--timeout", "0"],
     "argument --timeout: not a positive number of seconds: '0' (see hms-txn abort-txns --help)",
     2),
    (["compact", "shop.orders", "--major", "--minor", "--uri", "{URI}"],
     "argument --minor: not allowed with argument --major (see hms-txn compact --help)", 2),
    (["show-locks", "--conf", "{ROOT}"],
     "cannot read the configuration file {ROOT}: Is a directory", 2),
    (["abort-txns", "1", "--conf", "{ROOT}/missing.xml"],
     "configuration file not found: {ROOT}/missing.xml", 2),
    (["show-locks", "--user", "alice", "--uri", "{URI}"],
     "--user and --password-file go together (SASL PLAIN)", 2),
    (["show-locks", "--uri", "{URI}", "--hiveconf", "hive.metastore.sasl.enabled=true"],
     "the metastore requires SASL (hive.metastore.sasl.enabled=true): give a user and password "
     "(--user/--password-file, or hive.metastore.client.plain.username), a delegation token "
     "file in HADOOP_TOKEN_FILE_LOCATION (hms-txn delegation-token), or a Kerberos identity "
     "(hadoop.security.authentication=kerberos and hive.metastore.kerberos.principal, with "
     "kinit or --principal/--keytab)", 2),
    (["show-compactions", "--uri", "{URI}", "--hiveconf", "hive.metastore.use.SSL=true",
      "--hiveconf", "hive.metastore.truststore.path={ROOT}/missing.pem"],
     "<defaults>: hive.metastore.truststore.path: cannot load trusted certificates from "
     "{ROOT}/missing.pem (PEM or JKS): No such file or directory", 2),
    (["show-locks", "--uri", "thrift://127.0.0.1:1"], CONNECT_REFUSED, 2),
    (["abort-txns", "1", "--uri", "thrift://127.0.0.1:1"], CONNECT_REFUSED, 2),
    (["compact", "shop.orders", "--uri", "thrift://127.0.0.1:1"], CONNECT_REFUSED, 2),
    (["show-compactions", "--uri", "thrift://127.0.0.1:1"], CONNECT_REFUSED, 2),
    (["show-transactions", "--conf", "{ROOT}/uris.xml"],
     "hive.metastore.uris: not a thrift://host:port URI: 'http://x:1'", 2),
    # errors the server answered: a TLS-only server, a server at its connection limit
    (["show-transactions", "--uri", "{TLS_URI}"],
     "the metastore failed the call: " + REQUIRES_TLS, 2),
    (["abort-txns", "1", "--uri", "{TLS_URI}"], "the metastore failed the call: " + REQUIRES_TLS,
     2),
    (["compact", "shop.orders", "--uri", "{TLS_URI}"],
     "the metastore failed the call: " + REQUIRES_TLS, 2),
    (["show-locks", "--uri", "{FULL_URI}"],
     "the metastore failed the call: hms-txn is at its connection limit (1, "
     "hive.metastore.server.max.threads); try again later", 2),
    (["show-compactions", "--uri", "{FULL_URI}"],
     "the metastore failed the call: hms-txn is at its connection limit (1, "
     "hive.metastore.server.max.threads); try again later", 2),
    # the token commands
    (["delegation-token", "--uri", "{URI}", "--user", "a", "--password-file", "{ROOT}/nope",
      "--output", "{ROOT}/token"],
     "cannot read the password file {ROOT}/nope: No such file or directory", 2),
    (["delegation-token", "--uri", "{URI}", "--user", "a", "--output", "{ROOT}/token"],
     "--user and --password-file go together (SASL PLAIN)", 2),
    (["delegation-token", "--uri", "{URI}", "--keytab", "{ROOT}/k", "--output", "{ROOT}/token"],
     "--keytab needs --principal (the principal whose key it holds)", 2),
    (["renew-delegation-token", "--uri", "{URI}", "--user", "a", "--password-file",
      "{ROOT}/pw", "--token-file", "{ROOT}/not-credentials"],
     "cannot read the credentials file {ROOT}/not-credentials: not a Hadoop credentials file "
     "(no HDTS header)", 2),
    # serve and upgrade-schema: the database and the data directory
    (["serve", "--data-dir", "{ROOT}/db1", "--hiveconf",
      "javax.jdo.option.ConnectionURL=jdbc:mysql://db:3306/hms"],
     "<defaults>: javax.jdo.option.ConnectionURL: unsupported database 'mysql' in "
     "'jdbc:mysql://db:3306/hms'; " + SUPPORTED, 2),
    (["upgrade-schema", "--data-dir", "{ROOT}/db1", "--hiveconf",
      "javax.jdo.option.ConnectionURL=mysql+pymysql://u@db/hms"],
     "<defaults>: javax.jdo.option.ConnectionURL: unsupported database 'mysql+pymysql' in "
     "'mysql+pymysql://u@db/hms'; " + SUPPORTED, 2),
    (["serve", "--data-dir", "{ROOT}/db2", "--hiveconf",
      "javax.jdo.option.ConnectionURL=jdbc:postgresql://127.0.0.1:1/hms"],
     'cannot use the database postgresql+psycopg://127.0.0.1:1/hms: connection failed: '
     'connection to server at "127.0.0.1", port 1 failed: Connection refused', 2),
    (["upgrade-schema", "--data-dir", "{ROOT}/db2", "--hiveconf",
      "javax.jdo.option.ConnectionURL=jdbc:postgresql://127.0.0.1:1/hms",
      "--hiveconf", "javax.jdo.option.ConnectionPassword=secret",
      "--hiveconf", "javax.jdo.option.ConnectionUserName=hive"],
     'cannot use the database postgresql+psycopg://hive:***@127.0.0.1:1/hms: connection '
     'failed: connection to server at "127.0.0.1", port 1 failed: Connection refused', 2),
    (["serve", "--data-dir", "{ROOT}/a-file/data"],
     "cannot start: Not a directory: {ROOT}/a-file/data", 2),
    (["upgrade-schema", "--data-dir", "{ROOT}/a-file/data"],
     "cannot use the database sqlite:///{ROOT}/a-file/data/metastore.sqlite: unable to open "
     "database file", 2),
    (["serve", "--data-dir", "{ROOT}/db3", "--hiveconf", "hive.metastore.port=99999"],
     "<defaults>: invalid value '99999' for hive.metastore.port: not a TCP port: '99999'", 2),
    # (the server logs what it did before it found the port taken: here only warnings)
    (["--log-level", "WARNING", "serve", "--data-dir", "{ROOT}/db4", "--host", "127.0.0.1",
      "--port", "{PORT}"],
     "cannot listen on 127.0.0.1:{PORT}: Address already in use", 2),
    (["serve", "--data-dir", "{ROOT}/db5", "--hiveconf", "hive.metastore.use.SSL=true"],
     "<defaults>: hive.metastore.use.SSL=true needs hive.metastore.keystore.path (a PEM file "
     "with the server's certificate and key)", 2),
]


@pytest.mark.parametrize("argv, message, status", CASES,
                         ids=[" ".join(c[0][:3]) + f" #{i}" for i, c in enumerate(CASES)])
def test_bad_input_is_one_line_and_changes_nothing(env, argv, message, status, capsys,
                                                   monkeypatch, tmp_path):
    values, c = env
    monkeypatch.delenv("HADOOP_TOKEN_FILE_LOCATION", raising=False)
    monkeypatch.chdir(tmp_path)
    from hms_bench.servers import write_site_xml
    write_site_xml(os.path.join(values["ROOT"], "uris.xml"), {"hive.metastore.uris": "http://x:1"})
    fill = lambda s: s.format(**values)   # noqa: E731
    before = server_state(c)
    capsys.readouterr()
    try:
        got = main([fill(a) for a in argv])
    except SystemExit as exit_:          # argparse's errors end in SystemExit
        got = exit_.code
    out, err = capsys.readouterr()
    assert (err, got) == (f"hms-txn: {fill(message)}\n", status), out
    assert server_state(c) == before


def test_a_declared_exception_is_one_line():
    """What a method's declared exception (here MetaException) becomes."""
    message, status = explain(t.MetaException("table x\nis locked"))
    assert (message, status) == ("the metastore answered MetaException: table x", 2)
