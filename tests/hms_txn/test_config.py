"""hive-site.xml parsing, typed keys, aliases and database URL mapping."""

from __future__ import annotations

import pytest

from hms_txn.common.config import ConfigError, Config, jdbc_to_sqlalchemy, load, parse_duration
from tests.support.servers import write_site_xml


@pytest.mark.parametrize("text, seconds", [
    ("300", 300), ("300s", 300), ("5m", 300), ("1500ms", 1.5), ("2h", 7200), ("1d", 86400),
    ("10 sec", 10), ("3 minutes", 180),
])
def test_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


def test_duration_default_unit_is_per_key():
    # Hive declares the reaper start/interval in milliseconds when no unit is given.
    config = Config({"hive.timedout.txn.reaper.interval": "5000", "hive.txn.timeout": "20"})
    assert config["hive.timedout.txn.reaper.interval"] == 5.0
    assert config["hive.txn.timeout"] == 20.0


@pytest.mark.parametrize("bad", ["soon", "-5s", "10 fortnights", ""])
def test_bad_duration(bad):
    with pytest.raises(ConfigError, match="hive.txn.timeout"):
        Config({"hive.txn.timeout": bad})


def test_defaults_and_unknown_keys_ignored():
    config = Config({"hive.exec.dynamic.partition": "true", "some.other.component": "x"})
    assert config["hive.metastore.port"] == 9083
    assert config["hive.txn.timeout"] == 300.0
    assert config["hive.max.open.txns"] == 100000
    assert config["hive.metastore.thrift.framed.transport.enabled"] is False


def test_metastore_aliases():
    config = Config({"metastore.thrift.port": "9999", "metastore.txn.timeout": "1m"})
    assert config["hive.metastore.port"] == 9999
    assert config["hive.txn.timeout"] == 60.0
    assert config.lookup_string("hive.txn.timeout") == "1m"
    assert config.lookup_string("metastore.txn.timeout") == "1m"


@pytest.mark.parametrize("key, value", [
    ("hive.metastore.port", "99999"), ("hive.metastore.thrift.compact.protocol.enabled", "maybe"),
    ("hive.max.open.txns", "0"), ("hive.txn.max.open.batch", "many"),
])
def test_invalid_values_name_the_key(key, value):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        Config({key: value})


@pytest.mark.parametrize("jdbc, url", [
    ("jdbc:postgresql://db:5432/hms", "postgresql+psycopg://hive:p%40ss@db:5432/hms"),
    ("postgresql://u@h/db", "postgresql+psycopg://u@h/db"),
    ("postgresql+psycopg2://u@h/db", "postgresql+psycopg2://u@h/db"),
])
def test_jdbc_urls(jdbc, url):
    assert jdbc_to_sqlalchemy(jdbc, "hive", "p@ss") == url


def test_sqlite_jdbc_url_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert jdbc_to_sqlalchemy("jdbc:sqlite:meta.db") == f"sqlite:///{tmp_path}/meta.db"


@pytest.mark.parametrize("bad", ["jdbc:oracle:thin:@h:1521:x", "jdbc:postgresql:/nohost", "nonsense",
                                 "jdbc:mysql://db:3306/hms", "jdbc:mariadb://db/hms",
                                 "mysql+pymysql://u@db/hms"])
def test_unsupported_database_urls(bad):
    with pytest.raises(ConfigError, match="ConnectionURL") as err:
        Config({"javax.jdo.option.ConnectionURL": bad}).database_url("/tmp")
    if "mysql" in bad or "maria" in bad or "oracle" in bad:
        assert "supported: SQLite" in str(err.value) and "PostgreSQL" in str(err.value)


def test_load_site_xml(tmp_path):
    path = write_site_xml(str(tmp_path / "hive-site.xml"), {"hive.metastore.port": "1234"})
    assert load(path)["hive.metastore.port"] == 1234
    assert load(path, {"hive.metastore.port": "4321"})["hive.metastore.port"] == 4321


def test_malformed_files(tmp_path):
    (tmp_path / "a.xml").write_text("<configuration><property>")
    with pytest.raises(ConfigError, match="not well-formed"):
        load(str(tmp_path / "a.xml"))
    (tmp_path / "b.xml").write_text("<props/>")
    with pytest.raises(ConfigError, match="<configuration>"):
        load(str(tmp_path / "b.xml"))
    (tmp_path / "c.xml").write_text("<configuration><property><value>1</value></property></configuration>")
    with pytest.raises(ConfigError, match="no <name>"):
        load(str(tmp_path / "c.xml"))
    with pytest.raises(ConfigError, match="not found"):
        load(str(tmp_path / "missing.xml"))


def test_warehouse_on_a_file_system_of_orc_acid_fs():
    with pytest.raises(ConfigError, match="hive.metastore.warehouse.dir"):
        Config({"hive.metastore.warehouse.dir": "ftp://nn/warehouse"}).warehouse_dir("/tmp")
    assert Config({"hive.metastore.warehouse.dir": "s3a://b/wh/"}).warehouse_dir("/t") == "s3a://b/wh"
    assert Config({"fs.s3a.endpoint": "h:1", "hive.x": "y"}).filesystem_options() == {
        "fs.s3a.endpoint": "h:1"}
    assert Config({"hive.metastore.warehouse.dir": "file:///data/wh"}).warehouse_dir("/tmp") == "/data/wh"
