-- Transactions: open, abort, heartbeats, and the reader's snapshot. Each function is one
-- call of the API (hms_txn.domain.txn's Python path does the same on SQLite; the rules and
-- the lock order are argued there and in hms_txn.domain.txn_records).

-- open_txns: p_count transactions; their first id, whether the id reservation was raised
-- (then the commit is synchronous), the open count when asked for one (p_refuse_at not
-- NULL: refused, o_first NULL, when at least that many are open) and the OPEN_TXN event's
-- id (p_event NULL: none, a READ_ONLY open). p_event: the message's parts around fromTxnId
-- and toTxnId.
CREATE FUNCTION hms_open_txns(p_count int, p_txn_type int, p_now bigint, p_user text,
                              p_host text, p_agent text, p_lazy boolean,
                              p_reserve_ahead bigint, p_refuse_at bigint, p_event text,
                              p_format text)
RETURNS TABLE (o_first bigint, o_raised boolean, o_open bigint, o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_open bigint;
    v_first bigint;
    v_last bigint;
    v_reserved bigint;
    v_raised boolean := false;
    v_event bigint;
BEGIN
    IF p_lazy THEN
        PERFORM hms_commit_lazily(true);
    END IF;
    IF p_refuse_at IS NOT NULL THEN
        SELECT count(*) INTO v_open FROM txns WHERE state = 'o';
        IF v_open >= p_refuse_at THEN
            RETURN QUERY SELECT NULL::bigint, false, v_open, NULL::bigint;
            RETURN;
        END IF;
    END IF;
    UPDATE next_txn_id SET next_id = next_id + p_count WHERE id = 1
        RETURNING next_id - p_count INTO v_first;
    IF NOT FOUND THEN
        INSERT INTO next_txn_id (id, next_id) VALUES (1, 1) ON CONFLICT DO NOTHING;
        UPDATE next_txn_id SET next_id = next_id + p_count WHERE id = 1
            RETURNING next_id - p_count INTO v_first;
    END IF;
    v_last := v_first + p_count - 1;
    INSERT INTO txns (txn_id, state, txn_type, started_ms, last_heartbeat_ms, heartbeat_count,
                      user_name, host, agent_info)
        SELECT g, 'o', p_txn_type, p_now, p_now, 0, p_user, p_host, p_agent
        FROM generate_series(v_first, v_last) AS g;
    IF p_lazy THEN
        -- After the counter's lock: this statement sees a reservation that another
        -- process's release lowered while this call waited for the lock.
        SELECT next_id INTO v_reserved FROM next_txn_id WHERE id = 2;
        IF v_last > coalesce(v_reserved, 0) THEN
            IF v_reserved IS NULL THEN
                INSERT INTO next_txn_id (id, next_id) VALUES (2, v_last + p_reserve_ahead)
                    ON CONFLICT DO NOTHING;
            ELSE
                UPDATE next_txn_id SET next_id = v_last + p_reserve_ahead
                    WHERE id = 2 AND next_id < v_last + p_reserve_ahead;
            END IF;
            v_raised := true;
            PERFORM hms_commit_lazily(false);
        END IF;
    END IF;
    IF p_event IS NOT NULL THEN
        v_event := hms_event('OPEN_TXN', NULL, NULL,
            hms_encode(hms_fill(p_event, ARRAY[v_first::text, v_last::text]), p_format),
            p_format, p_now);
    END IF;
    RETURN QUERY SELECT v_first, v_raised, v_open, v_event;
END $$;

-- Abort those of p_txns (ascending, distinct) that are open: their locks released, an
-- ABORT_TXN event each but for READ_ONLY ones (p_event: the message's parts around txnid).
-- The ids aborted and the events' ids (hms_txn.domain.txn_records.abort_in).
CREATE FUNCTION hms_abort(p_txns bigint[], p_now bigint, p_reason text, p_event text,
                          p_format text, OUT o_aborted bigint[], OUT o_events bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    o_aborted := '{}';
    o_events := '{}';
    FOR r IN SELECT txn_id, txn_type FROM txns WHERE txn_id = ANY (p_txns) AND state = 'o'
             ORDER BY txn_id FOR UPDATE LOOP
        o_aborted := o_aborted || r.txn_id;
        IF r.txn_type <> 2 THEN
            o_events := o_events || r.txn_id;     -- the transactions for now, event ids below
        END IF;
    END LOOP;
    IF cardinality(o_aborted) = 0 THEN
        RETURN;
    END IF;
    UPDATE txns SET state = 'a', ended_ms = p_now,
                    meta_info = CASE WHEN p_reason IS NULL OR p_reason = '' THEN meta_info
                                     ELSE left(p_reason, 1024) END
        WHERE txn_id = ANY (o_aborted);
    DELETE FROM hive_locks WHERE txn_id = ANY (o_aborted);
    FOR i IN 1 .. cardinality(o_events) LOOP
        o_events[i] := hms_event('ABORT_TXN', NULL, NULL,
            hms_encode(hms_fill(p_event, ARRAY[o_events[i]::text]), p_format), p_format, p_now);
    END LOOP;
END $$;

-- abort_txn: false when it was aborted already.
CREATE FUNCTION hms_abort_txn(p_txn bigint, p_now bigint, p_reason text, p_event text,
                              p_format text)
RETURNS TABLE (o_aborted boolean, o_events bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    v_state text;
    v_done bigint[];
    v_events bigint[];
BEGIN
    SELECT state INTO v_state FROM txns WHERE txn_id = p_txn FOR UPDATE;
    IF v_state IS NULL OR v_state = 'c' THEN
        PERFORM hms_raise_not_open(v_state, p_txn);
    END IF;
    IF v_state = 'a' THEN
        RETURN QUERY SELECT false, '{}'::bigint[];
        RETURN;
    END IF;
    SELECT a.o_aborted, a.o_events INTO v_done, v_events
        FROM hms_abort(ARRAY[p_txn], p_now, p_reason, p_event, p_format) a;
    RETURN QUERY SELECT true, v_events;
END $$;

-- abort_txns: best effort, the open ones (as Hive).
CREATE FUNCTION hms_abort_txns(p_txns bigint[], p_now bigint, p_event text, p_format text)
RETURNS TABLE (o_aborted bigint[], o_events bigint[])
LANGUAGE sql AS $$
    SELECT a.o_aborted, a.o_events FROM hms_abort(p_txns, p_now, NULL, p_event, p_format) a
$$;

-- heartbeat: a lock's (txn-less locks), then a transaction's.
CREATE FUNCTION hms_heartbeat(p_lock bigint, p_txn bigint, p_now bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_lock IS NOT NULL AND p_lock <> 0 THEN
        UPDATE hive_locks SET last_heartbeat_ms = p_now, heartbeat_count = heartbeat_count + 1
            WHERE ext_id = p_lock;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'HM003',
                MESSAGE = format('No such lock: lockid:%s', p_lock);
        END IF;
    END IF;
    IF p_txn IS NOT NULL AND p_txn <> 0 THEN
        PERFORM hms_heartbeat_txn(p_txn, p_now);
    END IF;
END $$;

-- heartbeat_txn_range: the open ones heartbeated; the open and aborted ones of the range.
CREATE FUNCTION hms_heartbeat_txn_range(p_min bigint, p_max bigint, p_now bigint)
RETURNS TABLE (o_txn bigint, o_state text)
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE txns SET last_heartbeat_ms = p_now, heartbeat_count = heartbeat_count + 1
        WHERE txn_id BETWEEN p_min AND p_max AND state = 'o';
    RETURN QUERY SELECT t.txn_id, t.state::text FROM txns t
        WHERE t.txn_id BETWEEN p_min AND p_max AND t.state IN ('o', 'a');
END $$;

-- get_open_txns: the high watermark (the counter's row; none on a fresh database) and the
-- open and aborted transactions below it, one statement's snapshot.
CREATE FUNCTION hms_open_txns_snapshot()
RETURNS TABLE (o_next bigint, o_txn bigint, o_state text, o_type int)
LANGUAGE sql STABLE AS $$
    SELECT n.next_id, t.txn_id, t.state::text, t.txn_type
    FROM next_txn_id n LEFT JOIN txns t ON t.txn_id < n.next_id AND t.state IN ('o', 'a')
    WHERE n.id = 1 ORDER BY t.txn_id
$$;

-- get_open_txns_info: the same with every column of the transactions.
CREATE FUNCTION hms_open_txns_info()
RETURNS TABLE (o_next bigint, txn_id bigint, state text, txn_type int, started_ms bigint,
               last_heartbeat_ms bigint, heartbeat_count int, user_name text, host text,
               agent_info text, meta_info text)
LANGUAGE sql STABLE AS $$
    SELECT n.next_id, t.txn_id, t.state::text, t.txn_type, t.started_ms, t.last_heartbeat_ms,
           t.heartbeat_count, t.user_name::text, t.host::text, t.agent_info::text,
           t.meta_info::text
    FROM next_txn_id n LEFT JOIN txns t ON t.txn_id < n.next_id AND t.state IN ('o', 'a')
    WHERE n.id = 1 ORDER BY t.txn_id
$$;
