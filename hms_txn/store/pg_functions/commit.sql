-- commit_txn (hms_txn.domain.txn_commit.commit_txn's Python path, which argues the rules):
-- the write set, the write-write conflict check, the completed components, the state, the
-- locks released, COMMIT_TXN and, for a compaction's transaction, COMMIT_COMPACTION_EVENT.
-- Not here: a commit with keyValue or writeEventInfos (the Python path: the catalog's
-- documents and the write records' Thrift objects are built in Python).
--
-- p_lazy: the call may commit without a flush unless it records a write (then it is made
-- synchronous here, before the COMMIT). The messages' parts: p_commit_event COMMIT_TXN's
-- and p_abort_event ABORT_TXN's around txnid; p_compaction_event COMMIT_COMPACTION_EVENT's
-- around txnid, compactionId, type, dbname, tableName and partName.
-- o_outcome: 'c' committed, 'a' was committed already (o_commit_id its commit id), 'x' a
-- lost write-write conflict aborted it (o_conflict the message; the abort is committed).
CREATE FUNCTION hms_commit_txn(p_txn bigint, p_now bigint, p_check_conflicts boolean,
                               p_lazy boolean, p_commit_event text, p_abort_event text,
                               p_compaction_event text, p_format text)
RETURNS TABLE (o_outcome text, o_commit_id bigint, o_conflict text, o_events bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    c record;
    hit record;
    v_read_only boolean;
    v_has_comps boolean := false;
    v_upd_del boolean;
    v_commit_id bigint;
    v_recorded boolean;
    v_conflict text;
    v_events bigint[] := '{}';
    v_aborted record;
    e record;
BEGIN
    IF p_lazy THEN
        PERFORM hms_commit_lazily(true);
    END IF;
    SELECT * INTO r FROM txns WHERE txn_id = p_txn FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM hms_raise_not_open(NULL, p_txn);
    END IF;
    IF r.state = 'c' THEN
        RETURN QUERY SELECT 'a'::text, r.commit_id, NULL::text, '{}'::bigint[];
        RETURN;
    END IF;
    IF r.state = 'a' THEN
        PERFORM hms_raise_not_open('a', p_txn);
    END IF;
    v_read_only := r.txn_type = 2;
    IF NOT v_read_only THEN
        v_has_comps := EXISTS (SELECT 1 FROM txn_components WHERE txn_id = p_txn);
    END IF;
    IF p_lazy THEN
        -- A write recorded (components, a write id, a transaction type that may write
        -- beyond them): synchronous after all. Read after the row's lock: current.
        v_recorded := v_has_comps OR r.txn_type NOT IN (0, 2)
            OR (r.txn_type = 0 AND EXISTS (SELECT 1 FROM txn_to_write_id WHERE txn_id = p_txn));
        IF v_recorded THEN
            PERFORM hms_commit_lazily(false);
        END IF;
    END IF;
    v_upd_del := v_has_comps AND EXISTS (
        SELECT 1 FROM txn_components
        WHERE txn_id = p_txn AND operation_type IN (3, 4) AND tbl_name IS NOT NULL);
    IF v_upd_del THEN
        -- The counter's lock orders this commit against open_txns and other update/delete
        -- commits (hms_txn.domain.txn, "Cross-process safety").
        SELECT next_id - 1 INTO v_commit_id FROM next_txn_id WHERE id = 1 FOR UPDATE;
        IF p_check_conflicts THEN
            FOR c IN SELECT * FROM txn_components
                     WHERE txn_id = p_txn AND operation_type IN (3, 4) AND tbl_name IS NOT NULL
                     ORDER BY id LOOP
                SELECT * INTO hit FROM write_set w
                    WHERE w.db_name = c.db_name AND w.tbl_name = c.tbl_name
                      AND w.part_name IS NOT DISTINCT FROM c.part_name
                      AND w.commit_id >= p_txn AND w.txn_id <> p_txn
                      AND w.operation_type IN (3, 4)
                    ORDER BY w.commit_id LIMIT 1;
                IF FOUND THEN
                    v_conflict := format(
                        'Aborting [txnid:%s,%s] due to a write conflict on %s committed by [txnid:%s,%s] %s/%s',
                        p_txn, v_commit_id,
                        c.db_name || '/' || c.tbl_name || coalesce('/' || c.part_name, ''),
                        hit.txn_id, hit.commit_id,
                        CASE c.operation_type WHEN 3 THEN 'u' WHEN 4 THEN 'd' ELSE '?' END,
                        CASE hit.operation_type WHEN 3 THEN 'u' WHEN 4 THEN 'd' ELSE '?' END);
                    SELECT * INTO v_aborted
                        FROM hms_abort(ARRAY[p_txn], p_now, v_conflict, p_abort_event, p_format);
                    RETURN QUERY SELECT 'x'::text, v_commit_id, v_conflict, v_aborted.o_events;
                    RETURN;
                END IF;
            END LOOP;
        END IF;
        INSERT INTO write_set (db_name, tbl_name, part_name, txn_id, commit_id, operation_type)
            SELECT db_name, tbl_name, part_name, p_txn, v_commit_id, operation_type
            FROM (SELECT db_name, tbl_name, part_name, operation_type, min(id) AS first
                  FROM txn_components
                  WHERE txn_id = p_txn AND operation_type IN (3, 4) AND tbl_name IS NOT NULL
                  GROUP BY db_name, tbl_name, part_name, operation_type) s
            ORDER BY first;
    END IF;
    IF v_has_comps THEN
        INSERT INTO completed_txn_components (txn_id, db_name, tbl_name, part_name, write_id,
                                              update_delete, commit_ms)
            SELECT txn_id, db_name, tbl_name, part_name, write_id,
                   CASE WHEN v_upd_del THEN 'Y' ELSE 'N' END, p_now
            FROM txn_components WHERE txn_id = p_txn ORDER BY id;
        DELETE FROM txn_components WHERE txn_id = p_txn;
    END IF;
    UPDATE txns SET state = 'c', commit_id = v_commit_id, ended_ms = p_now WHERE txn_id = p_txn;
    IF r.heartbeat_count > 0 THEN
        -- Only lock() makes a transaction's locks, and it heartbeats the transaction.
        DELETE FROM hive_locks WHERE txn_id = p_txn;
    END IF;
    IF NOT v_read_only THEN
        IF r.txn_type IN (3, 5, 6) THEN     -- compaction, soft delete, rebalance compaction
            UPDATE compaction_queue
                SET next_txn_id = coalesce((SELECT next_id FROM next_txn_id WHERE id = 1), 1),
                    commit_ms = p_now
                WHERE txn_id = p_txn;
        END IF;
        v_events := v_events || hms_event('COMMIT_TXN', NULL, NULL,
            hms_encode(hms_fill(p_commit_event, ARRAY[p_txn::text]), p_format), p_format, p_now);
        IF r.txn_type IN (3, 6) THEN
            SELECT id, ctype, db_name, tbl_name, part_name INTO e
                FROM compaction_queue WHERE txn_id = p_txn LIMIT 1;
            IF FOUND THEN
                v_events := v_events || hms_event('COMMIT_COMPACTION_EVENT', e.db_name, e.tbl_name,
                    hms_encode(hms_fill(p_compaction_event, ARRAY[
                        p_txn::text, e.id::text,
                        hms_json_text(CASE e.ctype WHEN 1 THEN 'MINOR' WHEN 2 THEN 'MAJOR'
                                                   WHEN 3 THEN 'REBALANCE' END),
                        hms_json_text(e.db_name), hms_json_text(e.tbl_name),
                        hms_json_text(e.part_name)]), p_format),
                    p_format, p_now);
            END IF;
        END IF;
    END IF;
    RETURN QUERY SELECT 'c'::text, v_commit_id, NULL::text, v_events;
END $$;
