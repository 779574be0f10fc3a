-- campaign_delivery: per campaign and day, what Herald sent (herald.campaign_days: the jobs FCM, or
-- APNs for an app's campaign, accepted) beside what FCM's Data API reports of the campaign's
-- analytics label in its project's Android apps that day (herald.delivery_data, summed over the
-- apps: messages accepted, and each share of them weighted by the app's accepted messages).
-- Days are FCM's: America/Los_Angeles. A day FCM has not reported yet (it lags a day or more), a
-- campaign without a label, of no project or of an APNs app (service 'apns': Apple has no such
-- API) has null FCM figures. fcm_accepted counts only Android devices that opted in to sharing
-- usage data, so it is smaller than sent. campaigns_with_label: the project's campaigns that
-- sent with this label that day; more than 1, and FCM's figures are theirs together.
CREATE OR REPLACE VIEW herald.campaign_delivery AS
    SELECT c.id AS campaign_id, c.name, c.project, p.service, c.analytics_label, s.day, s.sent,
           f.messages_accepted AS fcm_accepted, f.apps AS fcm_apps, f.fetched_at AS fcm_fetched_at,
           f.delivered,
           f.pending,
           f.collapsed,
           f.dropped_too_many_pending,
           f.dropped_app_force_stopped,
           f.dropped_device_inactive,
           f.dropped_ttl_expired,
           f.delivered_no_delay,
           f.delayed_device_offline,
           f.delayed_device_doze,
           f.delayed_message_throttled,
           f.delayed_user_stopped,
           f.priority_lowered,
           (SELECT count(*) FROM herald.campaign_days s2 JOIN herald.campaigns c2 ON c2.id = s2.campaign_id
            WHERE s2.day = s.day AND c2.analytics_label = c.analytics_label AND c2.project = c.project) AS campaigns_with_label
    FROM herald.campaigns c
    JOIN herald.campaign_days s ON s.campaign_id = c.id
    LEFT JOIN herald.projects p ON p.name = c.project
    LEFT JOIN LATERAL (
        SELECT count(*) AS apps, sum(d.messages_accepted) AS messages_accepted, max(d.fetched_at) AS fetched_at,
               CASE WHEN count(d.delivered) = 1 THEN max(d.delivered)
                    ELSE round((sum(d.delivered * d.messages_accepted) / nullif(sum(d.messages_accepted) FILTER (WHERE d.delivered IS NOT NULL), 0))::numeric, 3)::float8
               END AS delivered,
               CASE WHEN count(d.pending) = 1 THEN max(d.pending)
                    ELSE round((sum(d.pending * d.messages_accepted) / nullif(sum(d.messages_accepted) FILTER (WHERE d.pending IS NOT NULL), 0))::numeric, 3)::float8
               END AS pending,
               CASE WHEN count(d.collapsed) = 1 THEN max(d.collapsed)
                    ELSE round((sum(d.collapsed * d.messages_accepted) / nullif(sum(d.messages_accepted) FILTER (WHERE d.collapsed IS NOT NULL), 0))::numeric, 3)::float8
               END AS collapsed,
               CASE WHEN count(d.dropped_too_many_pending) = 1 THEN max(d.dropped_too_many_pending)
                    ELSE round((sum(d.dropped_too_many_pending * d.messages_accepted) / nullif(sum(d.messages_accepted) FILTER (WHERE d.dropped_too_many_pending IS NOT NULL), 0))::numeric, 3)::float8
               END AS dropped_too_many_pending,
               CASE WHEN count(d.dropped_app_force_stopped) = 1 THEN max(d.dropped_app_force_stopped)
                    ELSE round((sum(d.dropped_app_force_stopped * d.messages_accepted) / nullif(sum(d.messages_accepted) FILTER (WHERE d.dropped_app_force_stopped IS NOT NULL), 0))::numeric, 3)::float8
               END AS dropped_app_force_stopped,
               CASE WHEN count(d.dropped_device_inactive) = 1 THEN max(d.dropped_device_inactive)
                    ELSE round((sum(d.dropped_device_inactive * d.messages_accepted) / nullif(sum(d.messages_accepted) FILTER (WHERE d.dropped_device_inactive IS NOT NULL), 0))::numeric, 3)::float8
               END AS dropped_device_inactive,
               CASE WHEN count(d.dropped_ttl_expired) = 1 THEN max(d.dropped_ttl_expired)
                    ELSE round((sum(d.dropped_ttl_expired * d.messages_accepted) / nullif(sum(d.messages_accepted) FILTER (WHERE d.dropped_ttl_expired IS NOT NULL), 0))::numeric, 3)::float8
               END AS dropped_ttl_expired,
               CASE WHEN count(d.delivered_no_delay) = 1 THEN max(d.delivered_no_delay)
                    ELSE round((sum(d.delivered_no_delay * d.messages_accepted) / nullif(sum(d.messages_accepted) FILTER (WHERE d.delivered_no_delay IS NOT NULL), 0))::numeric, 3)::float8
               END AS delivered_no_delay,
               CASE WHEN count(d.delayed_device_offline) = 1 THEN max(d.delayed_device_offline)
                    ELSE round((sum(d.delayed_device_offline * d.messages_accepted) / nullif(sum(d.messages_accepted) FILTER (WHERE d.delayed_device_offline IS NOT NULL), 0))::numeric, 3)::float8
               END AS delayed_device_offline,
               CASE WHEN count(d.delayed_device_doze) = 1 THEN max(d.delayed_device_doze)
                    ELSE round((sum(d.delayed_device_doze * d.messages_accepted) / nullif(sum(d.messages_accepted) FILTER (WHERE d.delayed_device_doze IS NOT NULL), 0))::numeric, 3)::float8
               END AS delayed_device_doze,
               CASE WHEN count(d.delayed_message_throttled) = 1 THEN max(d.delayed_message_throttled)
                    ELSE round((sum(d.delayed_message_throttled * d.messages_accepted) / nullif(sum(d.messages_accepted) FILTER (WHERE d.delayed_message_throttled IS NOT NULL), 0))::numeric, 3)::float8
               END AS delayed_message_throttled,
               CASE WHEN count(d.delayed_user_stopped) = 1 THEN max(d.delayed_user_stopped)
                    ELSE round((sum(d.delayed_user_stopped * d.messages_accepted) / nullif(sum(d.messages_accepted) FILTER (WHERE d.delayed_user_stopped IS NOT NULL), 0))::numeric, 3)::float8
               END AS delayed_user_stopped,
               CASE WHEN count(d.priority_lowered) = 1 THEN max(d.priority_lowered)
                    ELSE round((sum(d.priority_lowered * d.messages_accepted) / nullif(sum(d.messages_accepted) FILTER (WHERE d.priority_lowered IS NOT NULL), 0))::numeric, 3)::float8
               END AS priority_lowered
        FROM herald.delivery_data d
        WHERE d.project = c.project AND d.analytics_label = c.analytics_label AND d.day = s.day
        HAVING count(*) > 0
    ) f ON true;
