"""The ValidWriteIdList-aware metadata cache, kept current by tailing the notification log:
the cache and its state machine (``cache``), the thread that feeds it the log (``tailer``),
what it holds (``cache_entries``) and where it reads what it does not hold
(``cache_source``)."""
