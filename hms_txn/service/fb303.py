"""fb303 and session calls: version, status, set_ugi, configuration lookups."""

from __future__ import annotations

import logging
from typing import Any

from hms_txn.common.errors import InvalidInput
from hms_txn.wire.thrift_gen.fb303.ttypes import fb_status

log = logging.getLogger("hms_txn.handler")

# Hive version we speak: 4.x clients pick their newest code paths from it.
PROTOCOL_VERSION = "4.0.0"


class ServiceCalls:
    ms: Any

    def getName(self):
        return "hms-txn"

    def getVersion(self):
        return PROTOCOL_VERSION

    def getStatus(self):
        return fb_status.ALIVE

    def getStatusDetails(self):
        return "hms-txn is serving"

    def aliveSince(self):
        return int(self.ms.started_at)

    def getCounters(self):
        return self.ms.counters()

    def getCounter(self, key):
        return self.ms.counters().get(key, 0)

    # fb303 options: only the metadata cache's test hook ("hms_txn.cache.tailer.paused"),
    # and only when hms_txn.cache.tailer.pausable=true.
    _PAUSE_OPTION = "hms_txn.cache.tailer.paused"

    def setOption(self, key, value):
        if key != self._PAUSE_OPTION:
            raise InvalidInput(f"fb303 option {key} is not supported by hms-txn")
        if not self.ms.cache.pausable:
            raise InvalidInput(f"{key} can only be set with hms_txn.cache.tailer.pausable=true")
        if str(value).strip().lower() == "true":
            self.ms.cache.pause()
        else:
            self.ms.cache.resume()

    def getOption(self, key):
        if key == self._PAUSE_OPTION:
            return "true" if self.ms.cache.paused else "false"
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
        return [user_name or ""] + list(group_names or [])

    def getMetaConf(self, key):
        value = self.ms.config.lookup_string(key)
        if value is None:
            raise InvalidInput(f"{key} is not a metastore configuration key known to hms-txn")
        return value

    def setMetaConf(self, key, value):
        raise InvalidInput(f"{key} cannot be changed at run time on hms-txn")

    def get_config_value(self, name, defaultValue):
        value = self.ms.config.lookup_string(name)
        return defaultValue if value is None else value

    def flushCache(self):
        return None

    def get_metastore_db_uuid(self):
        return self.ms.db_uuid
