"""The ``hms-txn`` command line (``app``; the entry point is ``hms_txn.cli:main``).

The package's modules never import the package itself (a ``forbidden`` contract in
pyproject.toml): this module imports them, so an import back would be a cycle that
import-linter's ``acyclic_siblings`` contract cannot see (it compares a package's children,
never a child with its parent).
"""

from hms_txn.cli.app import main

__all__ = ["main"]
