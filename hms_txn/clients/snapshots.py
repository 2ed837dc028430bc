"""A reader's snapshot from the metastore's answers, as Hive's client builds it.

``get_open_txns`` answers the open and aborted transactions below the high watermark, with
the aborted ones flagged in ``abortedBits`` (Java's ``BitSet.toByteArray()``);
``get_valid_write_ids`` answers each table's write ids the same way. These turn them into
the ``orc_acid.valid_ids`` lists that readers and writers take.
"""

from __future__ import annotations

from orc_acid.valid_ids import ValidTxnList, ValidWriteIdList


def aborted_flags(bits: bytes | None, n: int) -> list[bool]:
    """The first ``n`` positions of a Java ``BitSet.toByteArray()``."""
    bits = bits or b""
    return [(i // 8 < len(bits)) and bool((bits[i // 8] >> (i % 8)) & 1) for i in range(n)]


def valid_txn_list(response, current_txn: int = 0) -> ValidTxnList:
    """The ValidTxnList of a ``GetOpenTxnsResponse`` (Hive's ``createValidReadTxnList``):
    inside transaction ``current_txn`` (0: none) everything above it is invisible and it
    sees its own writes."""
    hwm = response.txn_high_water_mark
    if current_txn > 0:
        hwm = min(current_txn, hwm)
    ids = list(response.open_txns or [])
    open_ids, aborted = [], []
    for txn, was_aborted in zip(ids, aborted_flags(response.abortedBits, len(ids))):
        if txn == current_txn or txn > hwm:
            continue
        (aborted if was_aborted else open_ids).append(txn)
    return ValidTxnList(hwm, open_ids, aborted)


def valid_write_id_list(table) -> ValidWriteIdList:
    """The ValidWriteIdList of one ``TableValidWriteIds``."""
    invalid = list(table.invalidWriteIds or [])
    flags = aborted_flags(table.abortedBits, len(invalid))
    opens = [w for w, a in zip(invalid, flags) if not a]
    aborted = [w for w, a in zip(invalid, flags) if a]
    return ValidWriteIdList(table.fullTableName, table.writeIdHighWaterMark, open_ids=opens,
                            aborted_ids=aborted, min_open=table.minOpenWriteId if opens else None)
