"""``hms-txn cat`` and ``hms-txn head``: an ACID table's rows without Spark.

Both read through the Python API (``hms_txn.tables``): one snapshot of the table under a
read lock that is released when the command has printed what it reads, the ``--where``
condition's terms on partition columns pruning partitions through the metastore and the
whole condition filtering rows in the reader. ``cat`` writes every row (or ``--limit``) as
CSV, JSON lines or Parquet to standard output or ``--output``; ``head`` prints the first
rows (10 by default) as an aligned table.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Optional

from hms_txn.cli.connection import EPILOG, add_connection_args, read_password, render_table
from hms_txn.cli.errors import CommandError

FORMATS = ("csv", "json", "parquet", "table")


def register_table_view_commands(sub: argparse._SubParsersAction) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    for name, help_text, default_format, default_limit in (
            ("cat", "print an ACID table's rows (CSV, JSON lines or Parquet)", "csv", None),
            ("head", "print an ACID table's first rows", "table", 10)):
        p = sub.add_parser(name, help=help_text, formatter_class=fmt, epilog=EPILOG,
                           description=f"{help_text[0].upper()}{help_text[1:]} at one "
                                       f"snapshot, read without Spark (hms_txn.tables).")
        add_connection_args(p, json_help="the same as --format json")
        p.add_argument("table", metavar="db.table", help="the table (database default if "
                                                         "not given)")
        p.add_argument("--where", metavar="CONDITION",
                       help="SQL condition on the table's columns (Spark SQL, as "
                            "hive_acid takes it), e.g. \"day = '2024-05-01' AND qty > 0\"")
        p.add_argument("--columns", metavar="A,B,...", help="only these columns")
        p.add_argument("--limit", type=_count, default=default_limit, metavar="N",
                       help="at most N rows" + (f" (default {default_limit})"
                                                if default_limit else " (default: all)"))
        p.add_argument("--format", choices=FORMATS, default=default_format,
                       help=f"output format (default {default_format}; table: aligned "
                            f"columns)")
        p.add_argument("--output", metavar="FILE",
                       help="write to FILE instead of standard output")
        p.set_defaults(func=cmd_table_view)


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a row count (0 or more), got {text!r}")
    return n


def cmd_table_view(args: argparse.Namespace) -> int:
    from hms_txn.cli.options import load_config
    from hms_txn.tables import HiveAcidError, connect

    if bool(args.user) != bool(args.password_file):
        raise CommandError("--user and --password-file go together (SASL PLAIN)")
    fmt = "json" if args.json else args.format
    columns = [c.strip() for c in args.columns.split(",") if c.strip()] \
        if args.columns else None
    password = read_password(args.password_file) if args.password_file else None
    try:
        with connect(args.uri, conf=load_config(args), user=args.user, password=password,
                     timeout=args.timeout) as ms:
            with ms.reader(args.table, columns, args.where) as reader:
                out = _open_output(args.output, binary=fmt == "parquet")
                try:
                    rows = write_rows(reader, out, fmt, args.limit)
                finally:
                    if out is not sys.stdout and out is not sys.stdout.buffer:
                        out.close()
    except HiveAcidError as e:
        raise CommandError(str(e)) from None
    if args.output:
        print(f"{rows} row(s) written to {args.output}", file=sys.stderr)
    return 0


def _open_output(path: Optional[str], binary: bool):
    if path is None:
        return sys.stdout.buffer if binary else sys.stdout
    try:
        return open(path, "wb" if binary else "w", encoding=None if binary else "utf-8",
                    newline=None if binary else "")
    except OSError as e:
        raise CommandError(f"cannot write {path}: {e.strerror or e}") from None


def write_rows(reader, out, fmt: str, limit: Optional[int]) -> int:
    """Write the reader's rows (at most ``limit``) to ``out`` in ``fmt``; -> rows."""
    import pyarrow as pa

    def batches():
        n = 0
        for b in reader:
            if limit is not None and n + b.num_rows > limit:
                b = b.slice(0, limit - n)
            if b.num_rows:
                yield b
            n += b.num_rows
            if limit is not None and n >= limit:
                return

    rows = 0
    if fmt == "parquet":
        import pyarrow.parquet as pq
        with pq.ParquetWriter(out, reader.schema) as w:
            for b in batches():
                w.write_batch(b)
                rows += b.num_rows
        return rows
    if fmt == "csv":
        import pyarrow.csv as pcsv

        def csv(batch, header):
            sink = pa.BufferOutputStream()
            pcsv.write_csv(batch, sink, write_options=pcsv.WriteOptions(include_header=header))
            out.write(sink.getvalue().to_pybytes().decode("utf-8"))

        for b in batches():
            csv(b, rows == 0)
            rows += b.num_rows
        if rows == 0:             # no rows: the header alone
            csv(pa.RecordBatch.from_pylist([], schema=reader.schema), True)
        return rows
    if fmt == "json":
        for b in batches():
            for rec in b.to_pylist():
                out.write(json.dumps(rec, default=str) + "\n")
            rows += b.num_rows
        return rows
    table = pa.Table.from_batches(list(batches()), schema=reader.schema)
    out.write(render_table(table.column_names,
                           [[_cell(v) for v in r.values()] for r in table.to_pylist()]) + "\n")
    out.write(f"({table.num_rows} row(s))\n")
    return table.num_rows


def _cell(v) -> str:
    return "NULL" if v is None else str(v)


