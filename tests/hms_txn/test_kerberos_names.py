"""Principal names as Hadoop treats them (``hms_txn.common.kerberos_names``), Hadoop's proxy
user rules (``hms_txn.domain.security.proxy_users``) and the SASL protection names: no KDC needed.

The auth_to_local cases are those of Hadoop's own ``TestKerberosName`` (hadoop-auth), with
its rules and default realm, so a cluster's rules give the short names its Java services
give."""

from __future__ import annotations

import pytest

from hms_txn.common.config import Config, ConfigError
from hms_txn.common.kerberos_names import (AuthToLocal, KerberosNameError, parse_rpc_protection,
                                           server_principal)
from hms_txn.domain.security.proxy_users import ImpersonationRefused, ProxyUsers

HADOOP_RULES = """
  RULE:[1:$1@$0](.*@YAHOO\\.COM)s/@.*//
  RULE:[2:$1](johndoe)s/^.*$/guest/
  RULE:[2:$1;$2](^.*;admin$)s/;admin$//
  RULE:[2:$2](root)
  DEFAULT"""


@pytest.mark.parametrize("principal, short", [
    ("omalley@ATHENA.MIT.EDU", "omalley"),
    ("hdfs/10.0.0.1@ATHENA.MIT.EDU", "hdfs"),
    ("oom@YAHOO.COM", "oom"),
    ("johndoe/zoo@FOO.COM", "guest"),
    ("joe/admin@FOO.COM", "joe"),
    ("joe/root@FOO.COM", "root"),
    ("alice", "alice"),                     # already a short name
])
def test_hadoop_rules(principal, short):
    names = AuthToLocal(HADOOP_RULES, default_realm="ATHENA.MIT.EDU")
    assert names.short_name(principal) == short


@pytest.mark.parametrize("principal", ["foo@ACME.COM", "root/joe@foo.com"])
def test_no_rule_applies(principal):
    with pytest.raises(KerberosNameError, match=f"no auth_to_local rule applies to {principal}"):
        AuthToLocal(HADOOP_RULES, default_realm="ATHENA.MIT.EDU").short_name(principal)
    # the mit mechanism keeps the principal instead
    assert AuthToLocal(HADOOP_RULES, default_realm="ATHENA.MIT.EDU",
                       mechanism="mit").short_name(principal) == principal


def test_lower_case_and_non_simple_results():
    names = AuthToLocal("RULE:[1:$1]/L RULE:[2:$1/$2]", default_realm="R")
    assert names.short_name("Joe@FOO.COM") == "joe"
    with pytest.raises(KerberosNameError, match="non-simple name 'hive/host'"):
        names.short_name("hive/host@R")
    assert AuthToLocal("RULE:[2:$1/$2]", default_realm="R",
                       mechanism="mit").short_name("hive/host@R") == "hive/host"
    # Java's replacement syntax: $1 is a group
    assert AuthToLocal(r"RULE:[1:$1@$0](.*@EXAMPLE\.COM)s/(.*)@.*/u_$1/g",
                       default_realm="X").short_name("ann@EXAMPLE.COM") == "u_ann"


@pytest.mark.parametrize("rules", ["RULE:oops", "DEFAULTS", "RULE:[1:$1](a(b)s/x/y/"])
def test_malformed_rules_stop_the_configuration(rules):
    with pytest.raises(ConfigError, match="hadoop.security.auth_to_local"):
        Config({"hadoop.security.auth_to_local": rules})


def test_host_placeholder(monkeypatch):
    assert server_principal("hive/_HOST@EXAMPLE.COM", "Metastore.Example.COM") == \
        "hive/metastore.example.com@EXAMPLE.COM"
    assert server_principal("hive/fixed@EXAMPLE.COM", "other") == "hive/fixed@EXAMPLE.COM"
    assert server_principal("hive@EXAMPLE.COM", "other") == "hive@EXAMPLE.COM"
    monkeypatch.setattr("socket.getfqdn", lambda *a: "Node-1.Example.com")
    assert server_principal("hive/_HOST@R", "0.0.0.0") == "hive/node-1.example.com@R"
    assert server_principal("hive/_HOST@R") == "hive/node-1.example.com@R"


def test_hive_3_metastore_names_are_aliases():
    conf = Config({"metastore.kerberos.principal": "hive/_HOST@R",
                   "metastore.kerberos.keytab.file": "/k", "metastore.sasl.enabled": "true"})
    assert (conf["hive.metastore.kerberos.principal"], conf["hive.metastore.kerberos.keytab.file"],
            conf.kerberos_required()) == ("hive/_HOST@R", "/k", True)


def test_rpc_protection_lists():
    assert parse_rpc_protection("authentication") == ("auth",)
    assert parse_rpc_protection(" Privacy, integrity ,authentication") == (
        "auth-conf", "auth-int", "auth")
    assert Config({"hadoop.rpc.protection": "privacy"})["hadoop.rpc.protection"] == ("auth-conf",)
    with pytest.raises(ConfigError, match="'secret' is not one of authentication, integrity, "
                                          "privacy"):
        Config({"hadoop.rpc.protection": "secret"})


def test_proxy_user_rules():
    groups = {"alice": {"analysts"}, "bob": {"ops"}}
    proxies = ProxyUsers.from_config({
        "hadoop.proxyuser.oozie.groups": "analysts",
        "hadoop.proxyuser.oozie.hosts": "10.0.0.0/8,127.0.0.1",
        "hadoop.proxyuser.hue.users": "*", "hadoop.proxyuser.hue.hosts": "*",
        "hadoop.proxyuser.nohosts.users": "alice",
    }, groups_of=lambda user: groups.get(user, set()))
    proxies.authorize("oozie", "alice", "10.2.3.4")          # a member of analysts
    proxies.authorize("oozie", "alice", "127.0.0.1")
    proxies.authorize("hue", "bob", "192.168.7.7")
    with pytest.raises(ImpersonationRefused, match="User: oozie@R is not allowed to "
                                                   "impersonate bob"):
        proxies.authorize("oozie", "bob", "10.2.3.4", real_name="oozie@R")
    with pytest.raises(ImpersonationRefused, match="Unauthorized connection for super-user: "
                                                   "oozie from IP 192.168.1.1"):
        proxies.authorize("oozie", "alice", "192.168.1.1")
    with pytest.raises(ImpersonationRefused, match="from IP 127.0.0.1"):
        proxies.authorize("nohosts", "alice", "127.0.0.1")   # no hosts key: from nowhere
    with pytest.raises(ImpersonationRefused, match="User: mallory is not allowed"):
        proxies.authorize("mallory", "alice", "127.0.0.1")
