"""The service layer: the Thrift methods, each mapping wire structs to domain calls inside
a unit of work (``units``) that alone begins and commits transactions and decides their
durability. See docs/architecture.md."""
