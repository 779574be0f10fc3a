-- Herald: what reached the phones, from FCM's Data API, beside what Herald sent.
--
-- * herald.projects.android_apps: the Firebase app ids of a project's Android apps
--   (`herald projects set NAME --android-app ID`, herald.set_project_android_apps). FCM reports
--   delivery per app; a project without apps is not asked.
-- * herald.delivery_data: one row per project, app, day and analytics label, the counts and
--   percentages as FCM's Data API gives them (projects.androidApps.deliveryData.list), with when
--   they were fetched. FCM revises a day as late deliveries come in: a fetch replaces the rows of
--   every day it was given. FCM's days are America/Los_Angeles days. The row of the messages
--   without a label has analytics_label ''. No foreign key to the registry: the numbers outlive
--   a removed entry, as its campaigns do.
-- * herald.delivery_data_fetches: each project's last fetch (when, whether it was fetched or
--   skipped and why), so the leader fetches once a day whichever process leads, and the pages and
--   commands can say where the numbers stand.
-- * herald.campaign_days: what Herald sent for each campaign per day (the jobs FCM or APNs
--   accepted, counted by record_outcomes.sql as they complete), in the same days as FCM's
--   (America/Los_Angeles), so a campaign's sends and FCM's report of them meet on one row
--   (view herald.campaign_delivery) long after retention deleted the jobs. Filled here from the
--   completed jobs still in herald.jobs.

ALTER TABLE herald.projects
    ADD COLUMN android_apps text[] NOT NULL DEFAULT '{}'
        CONSTRAINT projects_android_apps_shape CHECK (
            cardinality(android_apps) <= 100
            AND array_to_string(android_apps, ' ') ~ '^([0-9]+:[0-9]+:android:[0-9a-f]+( |$))*$'
            AND array_position(android_apps, NULL) IS NULL),
    ADD CONSTRAINT projects_android_apps_fcm CHECK (service = 'fcm' OR android_apps = '{}');

CREATE TABLE herald.delivery_data (
    project                   text NOT NULL,
    app_id                    text NOT NULL,
    day                       date NOT NULL,
    analytics_label           text NOT NULL,
    -- countMessagesAccepted, countNotificationsAccepted (null: FCM gave none).
    messages_accepted         bigint,
    notifications_accepted    bigint,
    -- messageOutcomePercents: mutually exclusive shares of messages_accepted, 0 to 100.
    delivered                 double precision,
    pending                   double precision,
    collapsed                 double precision,
    dropped_too_many_pending  double precision,
    dropped_app_force_stopped double precision,
    dropped_device_inactive   double precision,
    dropped_ttl_expired       double precision,
    -- deliveryPerformancePercents (may overlap) and messageInsightPercents.priorityLowered.
    delivered_no_delay        double precision,
    delayed_device_offline    double precision,
    delayed_device_doze       double precision,
    delayed_message_throttled double precision,
    delayed_user_stopped      double precision,
    priority_lowered          double precision,
    -- FCM's whole `data` object, as it came (proxy notification insights, figures added later).
    data                      jsonb NOT NULL DEFAULT '{}',
    fetched_at                timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, app_id, day, analytics_label)
);

-- A campaign's rows: its project's rows of its label, by day.
CREATE INDEX delivery_data_label ON herald.delivery_data (project, analytics_label, day);

CREATE TABLE herald.delivery_data_fetches (
    project      text PRIMARY KEY,
    attempted_at timestamptz NOT NULL,
    -- When it last succeeded (null: never), and how many rows that stored.
    fetched_at   timestamptz,
    rows_stored  integer NOT NULL DEFAULT 0,
    pages        integer NOT NULL DEFAULT 0,
    -- 'fetched', 'skipped' (no access, no app: reason says which) or 'failed' (FCM or the network; tried again later).
    outcome      text NOT NULL CHECK (outcome IN ('fetched', 'skipped', 'failed')),
    reason       text
);

CREATE TABLE herald.campaign_days (
    campaign_id bigint NOT NULL,
    day         date NOT NULL,
    sent        bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (campaign_id, day)
);

-- Today's labels of a project (herald.campaign_label_budget).
CREATE INDEX campaign_days_day ON herald.campaign_days (day);

INSERT INTO herald.campaign_days (campaign_id, day, sent)
SELECT j.campaign_id, (j.finished_at AT TIME ZONE 'America/Los_Angeles')::date, count(*)
FROM herald.jobs j
WHERE j.campaign_id IS NOT NULL AND j.state = 'completed' AND j.finished_at IS NOT NULL
GROUP BY 1, 2;
