-- Campaign $1's days (herald.campaign_delivery), oldest first: what Herald sent and what FCM's Data
-- API reports of its label, the time FCM's figures were fetched as ISO 8601 UTC text.
SELECT to_char(day, 'YYYY-MM-DD') AS day, sent, fcm_accepted, fcm_apps,
       to_char(fcm_fetched_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS fcm_fetched_at,
       delivered, pending, collapsed, dropped_too_many_pending, dropped_app_force_stopped, dropped_device_inactive, dropped_ttl_expired, delivered_no_delay, delayed_device_offline, delayed_device_doze, delayed_message_throttled, delayed_user_stopped, priority_lowered, campaigns_with_label
FROM herald.campaign_delivery WHERE campaign_id = $1 ORDER BY day
