-- The compactor's claim (hms_txn.domain.compaction_bookkeeping.claim_next's Python path):
-- the oldest initiated request becomes working, owned by p_worker, under the "compaction"
-- mutex, so our Workers and Hive Workers (find_next_compact2) never take the same one.
-- p_pool: only that pool's requests; else p_enqueued_before (not NULL): only requests of
-- no pool or enqueued before it. The claimed row; none when nothing waits.
CREATE FUNCTION hms_claim_compaction(p_worker text, p_version text, p_pool text,
                                     p_enqueued_before bigint, p_now bigint)
RETURNS SETOF compaction_queue
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    PERFORM hms_lock_mutex('compaction');
    SELECT id INTO v_id FROM compaction_queue
        WHERE state = 'i'
          AND (p_pool IS NULL OR pool_name = p_pool)
          AND (p_pool IS NOT NULL OR p_enqueued_before IS NULL OR pool_name IS NULL
               OR enqueue_ms < p_enqueued_before)
        ORDER BY id LIMIT 1;
    IF v_id IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY UPDATE compaction_queue
        SET state = 'w', worker_id = p_worker, worker_version = p_version, start_ms = p_now,
            txn_id = NULL, highest_write_id = NULL, error_message = NULL
        WHERE id = v_id RETURNING *;
END $$;
