-- Stores what FCM's Data API gave for one app of a project ($1 project, $2 app id): $3 a JSON array
-- of one object per day and label ({day, label, messages_accepted, notifications_accepted, delivered,
-- ..., priority_lowered, data}), days before $4 (NULL: none) left as they are. Each day given is
-- replaced: its rows take the new figures (fetched_at now), and a label FCM no longer reports for
-- that day is deleted, so a day FCM revised reads as FCM reports it now. Returns the rows stored,
-- the rows deleted, and how many stored rows had other figures before (revised).
WITH kept AS (
    SELECT DISTINCT ON (x.day, x.label) x.*
    FROM jsonb_to_recordset($3::jsonb) AS x(day date, label text, messages_accepted bigint,
        notifications_accepted bigint, delivered float8, pending float8, collapsed float8,
        dropped_too_many_pending float8, dropped_app_force_stopped float8, dropped_device_inactive float8,
        dropped_ttl_expired float8, delivered_no_delay float8, delayed_device_offline float8,
        delayed_device_doze float8, delayed_message_throttled float8, delayed_user_stopped float8,
        priority_lowered float8, data jsonb)
    WHERE $4::date IS NULL OR x.day >= $4::date
    ORDER BY x.day, x.label
),
before AS (
    SELECT d.* FROM herald.delivery_data d
    WHERE d.project = $1 AND d.app_id = $2 AND d.day IN (SELECT k.day FROM kept k)
),
removed AS (
    DELETE FROM herald.delivery_data d
    USING before b
    WHERE d.project = b.project AND d.app_id = b.app_id AND d.day = b.day AND d.analytics_label =
        b.analytics_label
      AND NOT EXISTS (SELECT 1 FROM kept k WHERE k.day = b.day AND k.label = b.analytics_label)
    RETURNING 1
),
stored AS (
    INSERT INTO herald.delivery_data AS d (project, app_id, day, analytics_label, messages_accepted,
        notifications_accepted, delivered, pending, collapsed, dropped_too_many_pending,
        dropped_app_force_stopped, dropped_device_inactive, dropped_ttl_expired, delivered_no_delay,
        delayed_device_offline, delayed_device_doze, delayed_message_throttled, delayed_user_stopped,
        priority_lowered, data)
    SELECT $1, $2, k.day, k.label, k.messages_accepted, k.notifications_accepted, k.delivered,
        k.pending, k.collapsed, k.dropped_too_many_pending, k.dropped_app_force_stopped,
        k.dropped_device_inactive, k.dropped_ttl_expired, k.delivered_no_delay, k.delayed_device_offline,
        k.delayed_device_doze, k.delayed_message_throttled, k.delayed_user_stopped, k.priority_lowered,
        coalesce(k.data, '{}')
    FROM kept k
    ON CONFLICT ON CONSTRAINT delivery_data_pkey DO UPDATE SET
        messages_accepted = excluded.messages_accepted,
        notifications_accepted = excluded.notifications_accepted,
        delivered = excluded.delivered,
        pending = excluded.pending,
        collapsed = excluded.collapsed,
        dropped_too_many_pending = excluded.dropped_too_many_pending,
        dropped_app_force_stopped = excluded.dropped_app_force_stopped,
        dropped_device_inactive = excluded.dropped_device_inactive,
        dropped_ttl_expired = excluded.dropped_ttl_expired,
        delivered_no_delay = excluded.delivered_no_delay,
        delayed_device_offline = excluded.delayed_device_offline,
        delayed_device_doze = excluded.delayed_device_doze,
        delayed_message_throttled = excluded.delayed_message_throttled,
        delayed_user_stopped = excluded.delayed_user_stopped,
        priority_lowered = excluded.priority_lowered,
        data = excluded.data,
        fetched_at = now()
    RETURNING 1
)
SELECT (SELECT count(*) FROM stored) AS stored, (SELECT count(*) FROM removed) AS removed,
       (SELECT count(*) FROM kept k JOIN before b ON b.day = k.day AND b.analytics_label = k.label
        WHERE b.messages_accepted IS DISTINCT FROM k.messages_accepted OR b.notifications_accepted IS
            DISTINCT FROM k.notifications_accepted OR b.delivered IS DISTINCT FROM k.delivered OR b.pending
            IS DISTINCT FROM k.pending OR b.collapsed IS DISTINCT FROM k.collapsed OR
            b.dropped_too_many_pending IS DISTINCT FROM k.dropped_too_many_pending OR
            b.dropped_app_force_stopped IS DISTINCT FROM k.dropped_app_force_stopped OR
            b.dropped_device_inactive IS DISTINCT FROM k.dropped_device_inactive OR b.dropped_ttl_expired IS
            DISTINCT FROM k.dropped_ttl_expired OR b.delivered_no_delay IS DISTINCT FROM
            k.delivered_no_delay OR b.delayed_device_offline IS DISTINCT FROM k.delayed_device_offline OR
            b.delayed_device_doze IS DISTINCT FROM k.delayed_device_doze OR b.delayed_message_throttled IS
            DISTINCT FROM k.delayed_message_throttled OR b.delayed_user_stopped IS DISTINCT FROM
            k.delayed_user_stopped OR b.priority_lowered IS DISTINCT FROM k.priority_lowered) AS revised
