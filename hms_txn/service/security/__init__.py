"""Authorization and identity on the wire: the SQL-standard authorization calls, roles and
privileges (``authorization``), delegation tokens (``tokens``) and HiveServer2's token
store (``token_store``)."""
