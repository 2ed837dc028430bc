-- lock and check_lock (hms_txn.domain.locks' Python path argues the rules): decisions are
-- made one at a time under the "locks" mutex row, each against every earlier lock on the
-- same databases (a fair queue), with Hive 4's conflict matrix.

-- Hive's LockInfo.toString (hms_txn.domain.locks.lock_info_text).
CREATE FUNCTION hms_lock_text(p hive_locks) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT format('lockid:%s intLockId:%s txnid:%s db:%s table:%s partition:%s state:%s type:%s',
        p.ext_id, p.int_id, p.txn_id, coalesce(p.db_name, 'null'), coalesce(p.tbl_name, 'null'),
        coalesce(p.part_name, 'null'),
        CASE p.state WHEN 1 THEN 'ACQUIRED' WHEN 2 THEN 'WAITING' WHEN 3 THEN 'ABORT'
                     WHEN 4 THEN 'NOT_ACQUIRED' END,
        CASE p.lock_type WHEN 1 THEN 'SHARED_READ' WHEN 2 THEN 'SHARED_WRITE'
                         WHEN 3 THEN 'EXCLUSIVE' WHEN 4 THEN 'EXCL_WRITE' END)
$$;

-- Whether the requested component req must wait for the earlier lock ex
-- (hms_txn.domain.locks.conflicts): overlapping objects, not one transaction's, and Hive
-- 4's matrix with the database-level SHARED_READ exceptions.
CREATE FUNCTION hms_lock_conflicts(req hive_locks, ex hive_locks) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT req.db_name = ex.db_name
       AND (req.tbl_name IS NULL OR ex.tbl_name IS NULL
            OR (req.tbl_name = ex.tbl_name
                AND (req.part_name IS NULL OR ex.part_name IS NULL OR req.part_name = ex.part_name)))
       AND NOT (req.txn_id <> 0 AND req.txn_id = ex.txn_id)
       AND CASE req.lock_type
           WHEN 1 THEN ex.lock_type = 3 AND NOT (ex.tbl_name IS NOT NULL AND req.tbl_name IS NULL)
           WHEN 3 THEN NOT (ex.tbl_name IS NULL AND ex.lock_type = 1 AND req.tbl_name IS NOT NULL)
           WHEN 2 THEN ex.lock_type IN (3, 4)
           WHEN 4 THEN ex.lock_type <> 1
           ELSE true END
$$;

-- Grant every component of lock p_ext or none (caller holds the mutex): the first
-- conflict, components in order and earlier locks in queue order, decides. With
-- zero-wait reads or an exclusive CTAS a conflict drops the request instead (NOT_ACQUIRED).
-- States: 1 ACQUIRED, 2 WAITING, 4 NOT_ACQUIRED.
CREATE FUNCTION hms_lock_decide(p_ext bigint, p_txn bigint, p_zero_wait_read boolean,
                                p_exclusive_ctas boolean, p_now bigint)
RETURNS TABLE (o_lock bigint, o_state int, o_message text)
LANGUAGE plpgsql AS $$
DECLARE
    v_int int;
    v_type int;
    v_by_ext bigint;
    v_by_int int;
    v_text text;
BEGIN
    SELECT m.int_id, m.lock_type, e.ext_id, e.int_id, hms_lock_text(e)
        INTO v_int, v_type, v_by_ext, v_by_int, v_text
        FROM hive_locks m JOIN hive_locks e ON e.db_name = m.db_name AND e.ext_id < m.ext_id
        WHERE m.ext_id = p_ext AND hms_lock_conflicts(m, e)
        ORDER BY m.int_id, e.ext_id, e.int_id LIMIT 1;
    IF NOT FOUND THEN
        UPDATE hive_locks SET state = 1, acquired_ms = p_now, blocked_by_ext_id = NULL,
                              blocked_by_int_id = NULL
            WHERE ext_id = p_ext;
        RETURN QUERY SELECT p_ext, 1, NULL::text;
    ELSIF ((p_zero_wait_read AND v_type = 1) OR p_exclusive_ctas) AND p_txn <> 0 THEN
        DELETE FROM hive_locks WHERE ext_id = p_ext;
        RETURN QUERY SELECT p_ext, 4, CASE WHEN p_exclusive_ctas
            THEN 'Failed to initiate a concurrent CTAS operation with the same table name, '
                 || 'lockInfo : ' || v_text
            ELSE 'Unable to acquire read lock due to an existing exclusive lock {'
                 || v_text || '}' END;
    ELSE
        UPDATE hive_locks SET blocked_by_ext_id = v_by_ext, blocked_by_int_id = v_by_int
            WHERE ext_id = p_ext AND int_id = v_int;
        RETURN QUERY SELECT p_ext, 2, NULL::text;
    END IF;
END $$;

-- lock: the components, a JSON array of [type, db, table, partition, operation type]
-- (names lower-cased by the caller), and the ones the transaction records as written
-- (txn_components), [db, table, partition, operation type] each (chosen and deduplicated by
-- the caller, hms_txn.domain.locks.written_components). JSON text: one parameter, which
-- costs the driver a fraction of eight arrays.
CREATE FUNCTION hms_lock(p_txn bigint, p_user text, p_host text, p_agent text, p_now bigint,
                         p_zero_wait_read boolean, p_exclusive_ctas boolean,
                         p_components text, p_records text)
RETURNS TABLE (o_lock bigint, o_state int, o_message text)
LANGUAGE plpgsql AS $$
DECLARE
    v_type int;
    v_ext bigint;
BEGIN
    PERFORM hms_lock_mutex('locks');
    IF p_txn <> 0 THEN
        -- The heartbeat also marks the transaction as one that may hold locks (commit_txn
        -- releases locks only of a heartbeated transaction).
        v_type := hms_heartbeat_txn(p_txn, p_now);
    END IF;
    UPDATE next_lock_id SET next_id = next_id + 1 WHERE id = 1 RETURNING next_id - 1 INTO v_ext;
    IF NOT FOUND THEN
        INSERT INTO next_lock_id (id, next_id) VALUES (1, 1) ON CONFLICT DO NOTHING;
        UPDATE next_lock_id SET next_id = next_id + 1 WHERE id = 1 RETURNING next_id - 1 INTO v_ext;
    END IF;
    INSERT INTO hive_locks (ext_id, int_id, txn_id, db_name, tbl_name, part_name, state,
                            lock_type, operation_type, last_heartbeat_ms, heartbeat_count,
                            user_name, host, agent_info)
        SELECT v_ext, u.n, p_txn, u.c->>1, u.c->>2, u.c->>3, 2, (u.c->>0)::int,
               (u.c->>4)::int, CASE WHEN p_txn <> 0 THEN 0 ELSE p_now END, 0, p_user, p_host,
               p_agent
        FROM json_array_elements(p_components::json) WITH ORDINALITY AS u(c, n)
        ORDER BY u.n;
    IF p_txn <> 0 AND v_type <> 2 AND p_records <> '[]' THEN
        INSERT INTO txn_components (txn_id, db_name, tbl_name, part_name, operation_type, write_id)
            SELECT p_txn, u.c->>0, u.c->>1, u.c->>2, (u.c->>3)::int,
                   (SELECT w.write_id FROM txn_to_write_id w
                    WHERE w.txn_id = p_txn AND w.db_name = u.c->>0 AND w.tbl_name = u.c->>1)
            FROM json_array_elements(p_records::json) WITH ORDINALITY AS u(c, n)
            ORDER BY u.n;
    END IF;
    RETURN QUERY SELECT * FROM hms_lock_decide(v_ext, p_txn, p_zero_wait_read,
                                               p_exclusive_ctas, p_now);
END $$;

-- check_lock: heartbeats the owner (its transaction, or the txn-less lock itself); a lock
-- granted already stays so; else decided again.
CREATE FUNCTION hms_check_lock(p_ext bigint, p_now bigint)
RETURNS TABLE (o_lock bigint, o_state int, o_message text)
LANGUAGE plpgsql AS $$
DECLARE
    v_owner bigint;
    v_count bigint;
    v_acquired boolean;
BEGIN
    PERFORM hms_lock_mutex('locks');
    SELECT min(txn_id), count(*), bool_and(state = 1) INTO v_owner, v_count, v_acquired
        FROM hive_locks WHERE ext_id = p_ext;
    IF v_count = 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'HM003', MESSAGE = format('No such lock lockid:%s', p_ext);
    END IF;
    IF v_owner <> 0 THEN
        PERFORM hms_heartbeat_txn(v_owner, p_now);
    ELSE
        UPDATE hive_locks SET last_heartbeat_ms = p_now, heartbeat_count = heartbeat_count + 1
            WHERE ext_id = p_ext;
    END IF;
    IF v_acquired THEN
        RETURN QUERY SELECT p_ext, 1, NULL::text;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM hms_lock_decide(p_ext, v_owner, false, false, p_now);
END $$;
