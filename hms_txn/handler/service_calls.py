"""fb303 and session calls: version, status, set_ugi, configuration lookups."""

from __future__ import annotations

import logging
import time
from typing import Any

from ..errors import InvalidInput
from ..thrift_gen.fb303.ttypes import fb_status

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
        return {}

    def getCounter(self, key):
        return 0

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
