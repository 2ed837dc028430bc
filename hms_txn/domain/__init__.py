"""The domain layer: functions and classes that work on a database connection they are
given, plain Python in and out, grouped by concern (docs/architecture.md, "The parts of
`domain/` and `service/`"); the ``domain-concerns`` contract of pyproject.toml keeps the
concerns' order: ``model`` below everything, then ``events``, ``txn`` and ``stats``, the
concerns over them, and ``extension`` on top."""
