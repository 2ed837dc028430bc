"""Server configuration read from a Hadoop-style ``hive-site.xml``.

Users already have a hive-site.xml for their metastore, so we read that format and the
keys they know. Each key we honour is declared once in ``KEYS`` with its default, a parser
and its ``metastore.*`` alias (the names Hive 3's standalone metastore uses in
``metastore-site.xml``). Keys we do not know are ignored, because real hive-site.xml files
carry hundreds of keys for other components; a value we cannot parse for a key we do honour
stops start-up with a message naming the key.
"""

from __future__ import annotations

import difflib
import logging
import os
import xml.etree.ElementTree as ET
from typing import Any, Mapping, Sequence
from urllib.parse import quote, urlsplit

from orc_acid.fs import SCHEMES, hadoop_options, scheme_of

from hms_txn.common.config_keys import (  # noqa: F401  (ConfigError, parse_duration re-exported)
    ALIAS_TO_KEY, GZIP_MESSAGE_FORMAT, JSON_MESSAGE_FORMAT, KEYS, MESSAGE_ENCODERS,
    PASSTHROUGH_DEFAULTS, ConfigError, Key, parse_duration, parse_float)

log = logging.getLogger(__name__)
# Our own keys' namespace: a name in it that no key declares is a typo, not another
# component's setting.
OWN_PREFIX = "hms_txn."


class Config:
    """Typed view of configuration values (raw strings from hive-site.xml, plus overrides)."""

    def __init__(self, raw: Mapping[str, str] | None = None, *, source: str = "<defaults>"):
        self.source = source
        self.raw: dict[str, str] = {}
        for name, value in (raw or {}).items():
            self.raw[ALIAS_TO_KEY.get(name, name)] = value
            if name.startswith(OWN_PREFIX) and name not in KEYS:
                log.warning("%s: unknown key %s is ignored%s", source, name,
                            closest_key_hint(name))
        self._values: dict[str, Any] = {}
        for key in KEYS.values():
            if key.name in self.raw:
                try:
                    self._values[key.name] = key.parse(self.raw[key.name])
                except (ValueError, TypeError) as err:
                    raise ConfigError(
                        f"{source}: invalid value {self.raw[key.name]!r} for {key.name}: {err}"
                    ) from None
            else:
                self._values[key.name] = key.default

    def __getitem__(self, name: str) -> Any:
        return self._values[ALIAS_TO_KEY.get(name, name)]

    def with_overrides(self, **overrides: str) -> "Config":
        raw = dict(self.raw)
        raw.update({k: str(v) for k, v in overrides.items()})
        return Config(raw, source=self.source)

    def lookup_string(self, name: str) -> str | None:
        """The value a client asking for ``name`` should get (get_config_value, getMetaConf)."""
        canonical = ALIAS_TO_KEY.get(name, name)
        if "password" in canonical.lower():     # secrets are not handed out (as Hive's
            return None                         # hive.conf.hidden.list hides them)
        if canonical in self.raw:
            return self.raw[canonical]
        if canonical in KEYS:
            return format_value(KEYS[canonical], self._values[canonical])
        return PASSTHROUGH_DEFAULTS.get(canonical)

    # -- derived settings -----------------------------------------------------------------

    def event_message_format(self) -> str:
        """The MESSAGE_FORMAT of the notification events this server writes."""
        return MESSAGE_ENCODERS[self["hive.metastore.event.message.factory"]]

    def database_url(self, data_dir: str) -> str:
        """SQLAlchemy URL of the backing database."""
        jdbc = self["javax.jdo.option.ConnectionURL"]
        if not jdbc:
            path = os.path.abspath(os.path.join(data_dir, "metastore.sqlite"))
            return f"sqlite:///{path}"
        try:
            return jdbc_to_sqlalchemy(
                jdbc,
                self["javax.jdo.option.ConnectionUserName"],
                self["javax.jdo.option.ConnectionPassword"],
            )
        except ValueError as err:
            raise ConfigError(f"{self.source}: javax.jdo.option.ConnectionURL: {err}") from None

    def sasl_required(self) -> bool:
        """Whether clients must authenticate; raises ConfigError for unsupported modes."""
        mode = self["hive.metastore.authentication"]
        if mode in ("LDAP", "CUSTOM"):
            raise ConfigError(
                f"{self.source}: hive.metastore.authentication={mode} is not supported by "
                f"hms-txn; use KERBEROS, CONFIG (SASL PLAIN) or NOSASL")
        return self["hive.metastore.sasl.enabled"] or mode in ("CONFIG", "KERBEROS")

    def kerberos_required(self) -> bool:
        """Whether the server authenticates with Kerberos (SASL GSSAPI): Hive 4's
        ``hive.metastore.authentication=KERBEROS``, or SASL on with Hive 2.3's
        ``hadoop.security.authentication=kerberos`` or a principal and keytab of its own.
        A client with this configuration authenticates with Kerberos unless it has a
        password or a delegation token."""
        if self["hive.metastore.authentication"] == "KERBEROS":
            return True
        return self.sasl_required() and (
            self["hadoop.security.authentication"] == "kerberos"
            or bool(self["hive.metastore.kerberos.keytab.file"]))

    def warehouse_dir(self, data_dir: str) -> str:
        """The warehouse root: an absolute local path, or a location on another file
        system of ``orc_acid.fs`` (``s3a://bucket/warehouse``, ``abfs://...``)."""
        configured = self["hive.metastore.warehouse.dir"]
        if not configured:
            return os.path.abspath(os.path.join(data_dir, "warehouse"))
        parts = urlsplit(configured)
        if parts.scheme in ("", "file"):
            return os.path.abspath(parts.path if parts.scheme else configured)
        if scheme_of(configured) in SCHEMES:
            return configured.rstrip("/")
        raise ConfigError(
            f"{self.source}: hive.metastore.warehouse.dir: a local path or a location of "
            f"{', '.join(SCHEMES)}, got {configured!r}"
        )

    def filesystem_options(self) -> dict[str, str]:
        """The file-system keys of hive-site.xml (``fs.s3a.*``, ``fs.azure.*``, ``fs.gs.*``)
        as ``orc_acid.fs`` takes them: the one place the metastore builds them."""
        return hadoop_options(self.raw)


def closest_key_hint(name: str) -> str:
    """ "; did you mean K?" for the declared key closest to ``name``, or ""."""
    close = difflib.get_close_matches(name, KEYS, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def format_value(key: Key, value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and key.parse not in (parse_float,):
        # durations: Hive clients parse "300s" style values
        return f"{int(value) if value == int(value) else value}s"
    return str(value)


SUPPORTED_DATABASES = "SQLite (jdbc:sqlite:/path, sqlite:///path) and PostgreSQL " \
                      "(jdbc:postgresql://host:port/db, postgresql://...)"


def jdbc_to_sqlalchemy(url: str, user: str | None = None, password: str | None = None) -> str:
    """Map a JDBC URL (as found in hive-site.xml) to an SQLAlchemy URL.

    SQLAlchemy URLs of SQLite and PostgreSQL (``postgresql://...``, ``sqlite:///...``) are
    accepted as they are (``postgresql://`` with psycopg 3, the driver we depend on). Any
    other database (MySQL/MariaDB, Oracle, SQL Server, Derby) is
    refused with a ValueError naming the supported ones: the store's SQL is written and
    tested for these two only.
    """
    if not url.startswith("jdbc:"):
        scheme = url.partition("://")[0] if "://" in url else ""
        if not scheme:
            raise ValueError(f"not a JDBC or SQLAlchemy URL: {url!r}; supported: "
                             f"{SUPPORTED_DATABASES}")
        if scheme.partition("+")[0] not in ("sqlite", "postgresql"):
            raise ValueError(f"unsupported database {scheme!r} in {url!r}; supported: "
                             f"{SUPPORTED_DATABASES}")
        if scheme == "postgresql":      # the driver we install (SQLAlchemy's default differs)
            return "postgresql+psycopg" + url[len(scheme):]
        return url
    rest = url[len("jdbc:"):]
    if rest.startswith("sqlite:"):
        path = rest[len("sqlite:"):]
        if path.startswith("//"):
            path = path[2:]
        if not path:
            raise ValueError("jdbc:sqlite: needs a file path")
        return f"sqlite:///{os.path.abspath(path)}"
    if rest.startswith("postgresql:"):
        parts = urlsplit(rest)
        if not parts.hostname:
            raise ValueError(f"no host in {url!r}")
        auth = ""
        if user:
            auth = quote(user, safe="")
            if password:
                auth += ":" + quote(password, safe="")
            auth += "@"
        host = parts.hostname + (f":{parts.port}" if parts.port else "")
        # psycopg 3: it prepares a statement on the server once a connection has run it a
        # few times (hms_txn.store.engine, "Why psycopg 3").
        return f"postgresql+psycopg://{auth}{host}{parts.path}"
    kind = rest.partition(":")[0] or "?"
    raise ValueError(f"unsupported database {kind!r} in {url!r}; supported: "
                     f"{SUPPORTED_DATABASES}")


def read_site_xml(path: str) -> dict[str, str]:
    """Read ``<configuration><property><name/><value/></property>...`` into a dict."""
    try:
        tree = ET.parse(path)
    except FileNotFoundError:
        raise ConfigError(f"configuration file not found: {path}") from None
    except OSError as err:          # a directory, no permission
        raise ConfigError(f"cannot read the configuration file {path}: "
                          f"{err.strerror or err}") from None
    except ET.ParseError as err:
        raise ConfigError(f"{path}: not well-formed XML: {err}") from None
    root = tree.getroot()
    if root.tag != "configuration":
        raise ConfigError(f"{path}: root element must be <configuration>, found <{root.tag}>")
    values: dict[str, str] = {}
    for prop in root.iter("property"):
        name = prop.findtext("name")
        if name is None or not name.strip():
            raise ConfigError(f"{path}: a <property> has no <name>")
        values[name.strip()] = (prop.findtext("value") or "").strip()
    return values


def parse_overrides(items: Sequence[str] | None) -> dict[str, str]:
    """``--hiveconf KEY=VALUE`` arguments -> {key: value}."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--hiveconf takes KEY=VALUE, not {item!r}")
        out[key.strip()] = value.strip()
    return out


def load(path: str | None = None, overrides: Mapping[str, str] | None = None) -> Config:
    """Load hive-site.xml (or nothing: the embedded defaults) plus ``overrides``, over the
    Hadoop settings of ``core_site_files`` (hive-site.xml wins, as in Hive's HiveConf)."""
    raw: dict[str, str] = {}
    for core in core_site_files(path):
        raw.update(read_site_xml(core))
    if path:
        raw.update(read_site_xml(path))
    if overrides:
        raw.update(overrides)
    return Config(raw, source=path or "<defaults>")


def core_site_files(path: str | None = None) -> list[str]:
    """The core-site.xml files whose Hadoop keys (``hadoop.security.*``,
    ``hadoop.rpc.protection``, ``hadoop.proxyuser.*``) a configuration includes, as a Java
    metastore finds them on its classpath: ``$HADOOP_CONF_DIR/core-site.xml``, then the
    one beside ``path`` (the hive-site.xml)."""
    found = []
    dirs = [os.environ.get("HADOOP_CONF_DIR"),
            os.path.dirname(os.path.abspath(path)) if path else None]
    for d in filter(None, dirs):
        candidate = os.path.join(d, "core-site.xml")
        if os.path.isfile(candidate) and candidate not in found:
            found.append(candidate)
    return found
