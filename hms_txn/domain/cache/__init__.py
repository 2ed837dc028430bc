"""The ValidWriteIdList-aware metadata cache, kept current by tailing the notification log:
the cache and its state machine (``cache``), what it holds (``cache_entries``) and where it
reads what it does not hold (``cache_source``)."""
