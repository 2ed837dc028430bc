-- What the transaction functions share: Hive's "not open" errors, the mutex rows, the
-- notification log's numbering, and the message bodies' last step (holes filled, gzip).
--
-- Errors. A function refuses a call with RAISE ... USING ERRCODE 'HMnnn' and the text the
-- client must see (Hive's, as the Python path words it); hms_txn.store.txn_functions maps
-- each code to its hms_txn.common.errors class:
--   HM001 NoSuchTxn   HM002 TxnAborted   HM003 NoSuchLock   HM004 TxnOpen
--   HM005 InvalidInput   HM006 Internal
-- A raised error rolls the call's statement back: nothing of it happened.

-- Hive's raiseTxnUnexpectedState (hms_txn.domain.txn_records.raise_not_open).
CREATE FUNCTION hms_raise_not_open(p_state text, p_txn bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_state = 'a' THEN
        RAISE EXCEPTION USING ERRCODE = 'HM002',
            MESSAGE = format('Transaction txnid:%s already aborted', p_txn);
    ELSIF p_state = 'c' THEN
        RAISE EXCEPTION USING ERRCODE = 'HM001',
            MESSAGE = format('Transaction txnid:%s is already committed.', p_txn);
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'HM001',
        MESSAGE = format('No such transaction txnid:%s', p_txn);
END $$;

-- Heartbeat an open transaction (which also row-locks it); its type. Refused as Hive does
-- when it is not open (hms_txn.domain.txn_records.require_open_heartbeat).
CREATE FUNCTION hms_heartbeat_txn(p_txn bigint, p_now bigint) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_type int;
    v_state text;
BEGIN
    UPDATE txns SET last_heartbeat_ms = p_now, heartbeat_count = heartbeat_count + 1
        WHERE txn_id = p_txn AND state = 'o' RETURNING txn_type INTO v_type;
    IF NOT FOUND THEN
        SELECT state INTO v_state FROM txns WHERE txn_id = p_txn;
        PERFORM hms_raise_not_open(v_state, p_txn);
    END IF;
    RETURN v_type;
END $$;

-- The names of a JSON array (lists of names travel as JSON text: hms_txn.store.txn_functions).
CREATE FUNCTION hms_names(p_json text) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY(SELECT json_array_elements_text(p_json::json))
$$;

-- "txnid:1, txnid:2" (hms_txn.domain.writeids._txns).
CREATE FUNCTION hms_txn_list(p_ids bigint[]) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT string_agg('txnid:' || id, ', ' ORDER BY n) FROM unnest(p_ids) WITH ORDINALITY AS u(id, n)
$$;

-- The row lock of a txn_mutex row until the transaction ends (hms_txn.store.sql.lock_mutex).
CREATE FUNCTION hms_lock_mutex(p_name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM txn_mutex WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO txn_mutex (name) VALUES (p_name) ON CONFLICT DO NOTHING;
        PERFORM 1 FROM txn_mutex WHERE name = p_name FOR UPDATE;
    END IF;
END $$;

-- A message template filled: parts[1] || vals[1] || parts[2] || ... || parts[n+1], where the
-- parts are the template's text cut at each U+001F (a control character, which JSON text
-- never holds unescaped). The template is the JSON text of a Hive 4 message built in
-- Python (hms_txn.domain.event_messages.templates) with a hole where each value only the
-- database knows goes; each value is JSON text.
CREATE FUNCTION hms_fill(p_template text, p_vals text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    p_parts text[] := string_to_array(p_template, E'\x1f');
    v text := p_parts[1];
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_vals, 1), 0) LOOP
        v := v || p_vals[i] || p_parts[i + 1];
    END LOOP;
    RETURN v;
END $$;

-- A JSON array of numbers as Python's json writes it: [1,2,3].
CREATE FUNCTION hms_json_ids(p_ids bigint[]) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT '[' || coalesce(array_to_string(p_ids, ','), '') || ']'
$$;

-- A JSON value of a text as Python's json writes it (ensure_ascii off: the same escapes as
-- PostgreSQL's to_json), null for NULL.
CREATE FUNCTION hms_json_text(p_value text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(to_json(p_value)::text, 'null')
$$;

-- CRC-32 (the gzip trailer's) table.
CREATE FUNCTION hms_crc32_table() RETURNS bigint[]
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    t bigint[] := '{}';
    c bigint;
BEGIN
    FOR n IN 0 .. 255 LOOP
        c := n;
        FOR k IN 1 .. 8 LOOP
            IF c & 1 = 1 THEN
                c := 3988292384 # (c >> 1);      -- 0xEDB88320
            ELSE
                c := c >> 1;
            END IF;
        END LOOP;
        t := t || c;
    END LOOP;
    RETURN t;
END $$;

CREATE FUNCTION hms_le32(p bigint) RETURNS bytea
LANGUAGE sql IMMUTABLE AS $$
    SELECT set_byte(set_byte(set_byte(set_byte('\x00000000'::bytea,
        0, (p & 255)::int), 1, ((p >> 8) & 255)::int), 2, ((p >> 16) & 255)::int),
        3, ((p >> 24) & 255)::int)
$$;

-- gzip(json-2.0)'s MESSAGE of a JSON text: the UTF-8 bytes in a gzip stream, base64 without
-- line breaks (hms_txn.domain.event_messages.formats.encode). The deflate data is stored
-- blocks (no compression: PostgreSQL has no deflate), which every gzip reader decodes to
-- the same text; only the messages whose values the database fills in come through here
-- (the Python side encodes every message it can build whole).
CREATE FUNCTION hms_gzip_base64(p_text text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    data bytea := convert_to(p_text, 'UTF8');
    len int := length(data);
    t bigint[] := hms_crc32_table();
    crc bigint := 4294967295;
    body bytea := '\x1f8b08000000000000ff'::bytea;   -- gzip header: mtime 0, OS unknown (Python's)
    pos int := 0;
    n int;
BEGIN
    FOR i IN 0 .. len - 1 LOOP
        crc := t[((crc # get_byte(data, i)) & 255) + 1] # (crc >> 8);
    END LOOP;
    crc := crc # 4294967295;
    LOOP
        n := least(len - pos, 65535);
        body := body || CASE WHEN pos + n >= len THEN '\x01'::bytea ELSE '\x00'::bytea END
                || substring(hms_le32(n) FROM 1 FOR 2)
                || substring(hms_le32(65535 - n) FROM 1 FOR 2)
                || substring(data FROM pos + 1 FOR n);
        pos := pos + n;
        EXIT WHEN pos >= len;
    END LOOP;
    body := body || hms_le32(crc) || hms_le32(len);
    RETURN translate(encode(body, 'base64'), E'\n', '');
END $$;

-- The MESSAGE column of a JSON text filled in here, in the log's format.
CREATE FUNCTION hms_encode(p_json text, p_format text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_format = 'gzip(json-2.0)' THEN hms_gzip_base64(p_json) ELSE p_json END
$$;

-- One notification event, numbered by the sequence's row (locked to the end of the
-- transaction: ids are dense and in commit order, hms_txn.domain.notifications); its id.
CREATE FUNCTION hms_event(p_type text, p_db text, p_tbl text, p_message text,
                          p_format text, p_now_ms bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    UPDATE notification_sequence SET next_event_id = next_event_id + 1 WHERE id = 1
        RETURNING next_event_id - 1 INTO v_id;
    IF NOT FOUND THEN
        INSERT INTO notification_sequence (id, next_event_id) VALUES (1, 1) ON CONFLICT DO NOTHING;
        UPDATE notification_sequence SET next_event_id = next_event_id + 1 WHERE id = 1
            RETURNING next_event_id - 1 INTO v_id;
    END IF;
    INSERT INTO notification_log (event_id, event_time, event_type, cat_name, db_name, tbl_name,
                                  message, message_format)
        VALUES (v_id, (p_now_ms / 1000)::int, p_type, NULL, p_db, p_tbl, p_message, p_format);
    RETURN v_id;
END $$;

-- The durability of the call's commit (hms_txn.service.units decides; SET LOCAL, for the
-- transaction of the one statement that called the function).
CREATE FUNCTION hms_commit_lazily(p_lazy boolean) RETURNS void
LANGUAGE sql AS $$
    SELECT set_config('synchronous_commit', CASE WHEN p_lazy THEN 'off' ELSE 'on' END, true)
$$;
