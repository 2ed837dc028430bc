"""Authorization and identity: roles and privileges (Hive's SQL-standard authorization:
``roles``, ``privileges``), Hive delegation tokens (issued, renewed and cancelled:
``delegation_tokens``; their wire formats: ``token_codec``; HiveServer2's token store:
``token_store``) and Hadoop proxy users (``proxy_users``)."""
