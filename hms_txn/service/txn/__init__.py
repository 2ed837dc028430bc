"""Transactions, write ids and locks on the wire (``transactions``, ``locks``, with the
compaction requests), and the housekeeping thread that times them out and purges the
notification log (``housekeeping``)."""
