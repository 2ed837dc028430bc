-- Write ids (hms_txn.domain.writeids' Python path argues the rules).

-- allocate_table_write_ids: p_txns ascending and distinct, all open and not READ_ONLY or
-- nothing happens; a transaction keeps the write id it has; the fresh ones are announced by
-- ALLOC_WRITE_ID_EVENT (p_event: its parts around txnIdList and writeIdList). The pairs in
-- p_txns' order, and the event's id (NULL: nothing was fresh).
CREATE FUNCTION hms_allocate_write_ids(p_db text, p_tbl text, p_txns bigint[], p_now bigint,
                                       p_event text, p_format text)
RETURNS TABLE (o_txns bigint[], o_write_ids bigint[], o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    v_found bigint[] := '{}';
    v_aborted bigint[] := '{}';
    v_committed bigint[] := '{}';
    v_read_only bigint[] := '{}';
    v_missing bigint[];
    v_where text := format('Write ID allocation on %s.%s failed', p_db, p_tbl);
    v_fresh bigint[];
    v_first bigint;
    v_new bigint[];
    v_event bigint;
BEGIN
    FOR r IN SELECT txn_id, state, txn_type FROM txns WHERE txn_id = ANY (p_txns)
             ORDER BY txn_id FOR UPDATE LOOP
        v_found := v_found || r.txn_id;
        IF r.state = 'a' THEN
            v_aborted := v_aborted || r.txn_id;
        ELSIF r.state = 'c' THEN
            v_committed := v_committed || r.txn_id;
        ELSIF r.txn_type = 2 THEN
            v_read_only := v_read_only || r.txn_id;
        END IF;
    END LOOP;
    SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO v_missing
        FROM unnest(p_txns) AS id WHERE id <> ALL (v_found);
    IF cardinality(v_aborted) > 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'HM002',
            MESSAGE = format('%s: %s already aborted', v_where, hms_txn_list(v_aborted));
    END IF;
    IF cardinality(v_missing) > 0 OR cardinality(v_committed) > 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'HM001', MESSAGE = v_where || ': ' || concat_ws('; ',
            CASE WHEN cardinality(v_missing) > 0
                 THEN 'no such transaction ' || hms_txn_list(v_missing) END,
            CASE WHEN cardinality(v_committed) > 0
                 THEN hms_txn_list(v_committed) || ' already committed' END);
    END IF;
    IF cardinality(v_read_only) > 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'HM006',
            MESSAGE = format('%s: %s are read-only transactions', v_where,
                             hms_txn_list(v_read_only));
    END IF;
    SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO v_fresh FROM unnest(p_txns) AS id
        WHERE NOT EXISTS (SELECT 1 FROM txn_to_write_id w
                          WHERE w.db_name = p_db AND w.tbl_name = p_tbl AND w.txn_id = id);
    IF cardinality(v_fresh) > 0 THEN
        UPDATE next_write_id SET next_id = next_id + cardinality(v_fresh)
            WHERE db_name = p_db AND tbl_name = p_tbl
            RETURNING next_id - cardinality(v_fresh) INTO v_first;
        IF NOT FOUND THEN
            INSERT INTO next_write_id (db_name, tbl_name, next_id) VALUES (p_db, p_tbl, 1)
                ON CONFLICT DO NOTHING;
            UPDATE next_write_id SET next_id = next_id + cardinality(v_fresh)
                WHERE db_name = p_db AND tbl_name = p_tbl
                RETURNING next_id - cardinality(v_fresh) INTO v_first;
        END IF;
        SELECT array_agg(v_first + n - 1 ORDER BY n) INTO v_new
            FROM generate_series(1, cardinality(v_fresh)) AS n;
        INSERT INTO txn_to_write_id (txn_id, db_name, tbl_name, write_id)
            SELECT f.id, p_db, p_tbl, f.wid FROM unnest(v_fresh, v_new) AS f(id, wid);
        v_event := hms_event('ALLOC_WRITE_ID_EVENT', p_db, p_tbl,
            hms_encode(hms_fill(p_event, ARRAY[hms_json_ids(v_fresh), hms_json_ids(v_new)]),
                       p_format),
            p_format, p_now);
    END IF;
    RETURN QUERY
        SELECT array_agg(w.txn_id ORDER BY u.n), array_agg(w.write_id ORDER BY u.n), v_event
        FROM unnest(p_txns) WITH ORDINALITY AS u(id, n)
        JOIN txn_to_write_id w ON w.db_name = p_db AND w.tbl_name = p_tbl AND w.txn_id = u.id;
END $$;

-- get_valid_write_ids without the reader's snapshot, in one statement's snapshot: the
-- current snapshot (kind 'h': the high watermark in o_id; 's': an open or aborted
-- transaction below it, not READ_ONLY, in o_txn with its state), each table's counter
-- ('n': o_id the next write id) and the write ids that can matter ('w': of transactions
-- above the high watermark, and of the snapshot's exceptions). p_dbs, p_tbls: JSON arrays
-- of names; the tables are the pairs of p_dbs x p_tbls the caller picks out
-- (hms_txn.domain.writeids._snapshot_write_ids).
CREATE FUNCTION hms_snapshot_write_ids(p_dbs text, p_tbls text)
RETURNS TABLE (o_kind text, o_db text, o_tbl text, o_txn bigint, o_id bigint, o_state text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    dbs text[] := hms_names(p_dbs);
    tbls text[] := hms_names(p_tbls);
BEGIN
    RETURN QUERY
    WITH hwm AS (SELECT next_id - 1 AS h FROM next_txn_id WHERE id = 1),
    snap AS (SELECT t.txn_id, t.state FROM txns t, hwm
             WHERE t.state IN ('o', 'a') AND t.txn_id <= hwm.h AND t.txn_type <> 2)
    SELECT 'h'::text, NULL::text, NULL::text, NULL::bigint, h, NULL::text FROM hwm
    UNION ALL
    SELECT 's', NULL, NULL, txn_id, NULL::bigint, state::text FROM snap
    UNION ALL
    SELECT 'n', db_name::text, tbl_name::text, NULL::bigint, next_id, NULL FROM next_write_id
        WHERE db_name = ANY (dbs) AND tbl_name = ANY (tbls)
    UNION ALL
    SELECT 'w', w.db_name::text, w.tbl_name::text, w.txn_id, w.write_id, NULL
        FROM txn_to_write_id w
        WHERE w.db_name = ANY (dbs) AND w.tbl_name = ANY (tbls)
          AND w.txn_id > coalesce((SELECT h FROM hwm), 0)
    UNION ALL
    SELECT 'w', w.db_name::text, w.tbl_name::text, w.txn_id, w.write_id, NULL
        FROM txn_to_write_id w JOIN snap s ON s.txn_id = w.txn_id
        WHERE w.db_name = ANY (dbs) AND w.tbl_name = ANY (tbls);
END $$;

-- get_valid_write_ids with the reader's snapshot (its high watermark and its exceptions):
-- each table's counter (o_next) and the write ids that can matter (o_txn, o_write_id: of
-- transactions above the snapshot, and of its exceptions), one statement's snapshot.
-- p_dbs, p_tbls: JSON arrays of the names (a text parameter costs the driver less than a
-- text array); the tables are the pairs of p_dbs x p_tbls the caller picks out.
CREATE FUNCTION hms_valid_write_ids(p_dbs text, p_tbls text, p_hwm bigint, p_txns bigint[])
RETURNS TABLE (o_db text, o_tbl text, o_next bigint, o_txn bigint, o_write_id bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    dbs text[] := hms_names(p_dbs);
    tbls text[] := hms_names(p_tbls);
BEGIN
    RETURN QUERY
        SELECT n.db_name::text, n.tbl_name::text, n.next_id, NULL::bigint, NULL::bigint
        FROM next_write_id n WHERE n.db_name = ANY (dbs) AND n.tbl_name = ANY (tbls)
        UNION ALL
        SELECT w.db_name::text, w.tbl_name::text, NULL::bigint, w.txn_id, w.write_id
        FROM txn_to_write_id w
        WHERE w.db_name = ANY (dbs) AND w.tbl_name = ANY (tbls) AND w.txn_id > p_hwm
        UNION ALL
        SELECT w.db_name::text, w.tbl_name::text, NULL::bigint, w.txn_id, w.write_id
        FROM txn_to_write_id w WHERE w.txn_id = ANY (p_txns);
END $$;
