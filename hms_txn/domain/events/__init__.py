"""The notification log (``notifications``) and Hive 4's messages in it (``event_messages``):
every change of the metastore writes its event through these, in the change's own
transaction."""
