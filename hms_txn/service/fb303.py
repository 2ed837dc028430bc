"""fb303 and session calls: version, status, counters, options, set_ugi, configuration
lookups."""

from __future__ import annotations

import logging
import re
from typing import Callable, Protocol

from hms_txn.common.config import Config
from hms_txn.common.errors import InvalidInput
from hms_txn.wire.session import identity
from hms_txn.wire.thrift_gen.fb303.ttypes import fb_status
from hms_txn.wire.thrift_gen.hive_metastore.ttypes import ConfigValSecurityException

log = logging.getLogger("hms_txn.handler")

# Hive version we speak: 4.x clients pick their newest code paths from it.
PROTOCOL_VERSION = "4.0.0"

# The names get_config_value hands out (Hive 4's HMSHandler.get_config_value:
# Pattern.matches("(hive|hdfs|mapred|metastore).*", name), a match of the whole name).
_READABLE_CONFIG = re.compile(r"(hive|hdfs|mapred|metastore).*")


class TailerControls(Protocol):
    """The metadata cache's test hook: pausing its event tailer."""

    pausable: bool      # hms_txn.cache.tailer.pausable

    @property
    def paused(self) -> bool: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...


class Fb303Service:
    """fb303's ``FacebookService`` and the session calls of ``ThriftHiveMetastore``.

    ``counters`` gives getCounters' values; ``tailer`` is the metadata cache's pause hook;
    ``started_at`` (seconds since the epoch) and ``db_uuid`` are the server's."""

    def __init__(self, config: Config, counters: Callable[[], dict[str, int]],
                 tailer: TailerControls, started_at: float, db_uuid: str):
        self.config = config
        self.counters = counters
        self.tailer = tailer
        self.started_at = started_at
        self.db_uuid = db_uuid

    def getName(self):
        return "hms-txn"

    def getVersion(self):
        return PROTOCOL_VERSION

    def getStatus(self):
        return fb_status.ALIVE

    def getStatusDetails(self):
        return "hms-txn is serving"

    def aliveSince(self):
        return int(self.started_at)

    def getCounters(self):
        return self.counters()

    def getCpuProfile(self, profileDurationInSec):
        # Hive's FacebookBase answers an empty profile, whatever the duration.
        return ""

    def getCounter(self, key):
        return self.counters().get(key, 0)

    # fb303 options: only the metadata cache's test hook ("hms_txn.cache.tailer.paused"),
    # and only when hms_txn.cache.tailer.pausable=true.
    _PAUSE_OPTION = "hms_txn.cache.tailer.paused"

    def setOption(self, key, value):
        if key != self._PAUSE_OPTION:
            raise InvalidInput(f"fb303 option {key} is not supported by hms-txn")
        if not self.tailer.pausable:
            raise InvalidInput(f"{key} can only be set with hms_txn.cache.tailer.pausable=true")
        if str(value).strip().lower() == "true":
            self.tailer.pause()
        else:
            self.tailer.resume()

    def getOption(self, key):
        if key == self._PAUSE_OPTION:
            return "true" if self.tailer.paused else "false"
        return ""

    def getOptions(self):
        return {self._PAUSE_OPTION: self.getOption(self._PAUSE_OPTION)}

    def shutdown(self):
        # HiveMetaStoreClient.close() sends this oneway call; the Java server ignores it
        # and so do we: one client must never be able to stop the metastore.
        log.debug("ignored fb303 shutdown from a client")

    def reinitialize(self):
        log.debug("ignored fb303 reinitialize from a client")

    def set_ugi(self, user_name, group_names):
        # On an authenticated connection the user is who authenticated (a Kerberos
        # principal's short name), whatever name the client claims.
        return [identity(user_name) or ""] + list(group_names or [])

    def getMetaConf(self, key):
        value = self.config.lookup_string(key)
        if value is None:
            raise InvalidInput(f"{key} is not a metastore configuration key known to hms-txn")
        return value

    def setMetaConf(self, key, value):
        raise InvalidInput(f"{key} cannot be changed at run time on hms-txn")

    def get_config_value(self, name, defaultValue):
        """Hive 4's answer: ``defaultValue`` for no name; ConfigValSecurityException for a
        name outside Hive's allow-list (``javax.jdo.option.ConnectionPassword``, ...); the
        value set in the configuration, else the default of a key we know (ours, and
        Hive's defaults of the keys clients decide by, ``config_keys.PASSTHROUGH_DEFAULTS``),
        else ``defaultValue``."""
        if name is None:
            return defaultValue
        if not _READABLE_CONFIG.fullmatch(name):
            raise ConfigValSecurityException(
                message=f"For security reasons, the config key {name} cannot be accessed")
        value = self.config.lookup_string(name)
        return defaultValue if value is None else value

    def flushCache(self):
        return None

    def get_metastore_db_uuid(self):
        return self.db_uuid
