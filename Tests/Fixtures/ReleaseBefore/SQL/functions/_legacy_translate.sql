-- The translation itself (docs/legacy.md 4.2, steps 1-7); now_seconds is the clock for apns-expiration.
CREATE OR REPLACE FUNCTION herald._legacy_translate(payload jsonb, now_seconds bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    parameters constant text[] := ARRAY['to', 'registration_ids', 'condition', 'notification_key', 'collapse_key', 'priority',
                                        'content_available', 'mutable_content', 'time_to_live', 'restricted_package_name',
                                        'dry_run', 'data', 'notification'];
    notification_keys constant text[] := ARRAY['title', 'body', 'android_channel_id', 'icon', 'sound', 'tag', 'color',
                                               'click_action', 'body_loc_key', 'body_loc_args', 'title_loc_key',
                                               'title_loc_args', 'subtitle', 'badge', 'image'];
    p jsonb;
    notes jsonb := '[]';
    present text[];
    target_field text;
    targets jsonb := '[]';   -- [[field, value], ...]
    v jsonb;
    t text;
    n numeric;
    i integer;
    has_notification boolean;
    android jsonb := '{}';
    apns_headers jsonb := '{}';
    aps jsonb := '{}';
    webpush_headers jsonb := '{}';
    validate_only boolean := false;
    data jsonb := '{}';
    notification jsonb := '{}';
    android_notification jsonb := '{}';
    alert jsonb := '{}';
    webpush_notification jsonb := '{}';
    webpush_options jsonb := '{}';
    fields jsonb;
    m record;
    args jsonb;
    arg record;
    strings jsonb;
    shared jsonb := '{}';
    apns jsonb := '{}';
    webpush jsonb := '{}';
    messages jsonb;
    issue text;
    issue_field text;
BEGIN
    -- Step 1: an object.
    IF jsonb_typeof(payload) IS DISTINCT FROM 'object' THEN
        RETURN herald._legacy_reject('InvalidJson', 'legacy',
            'the legacy payload must be a JSON object, not ' || coalesce(jsonb_typeof(payload), 'null'));
    END IF;
    -- A null member counts as absent.
    SELECT coalesce(jsonb_object_agg(e.key, payload -> e.key), '{}') INTO p
    FROM jsonb_each(payload) AS e WHERE jsonb_typeof(e.value) <> 'null';

    -- Step 2: only Table 1's parameters (docs/legacy.md 1).
    SELECT e.key INTO t FROM jsonb_each(p) WITH ORDINALITY AS e(key, value, o)
    WHERE NOT e.key = ANY (parameters) ORDER BY e.o LIMIT 1;
    IF t IS NOT NULL THEN
        RETURN herald._legacy_reject('InvalidParameters', 'legacy.' || t, to_json(t)::text || ' is not a legacy parameter (docs/legacy.md Table 1)');
    END IF;

    -- Step 3: exactly one target.
    present := ARRAY(SELECT f FROM unnest(ARRAY['to', 'registration_ids', 'condition', 'notification_key']) WITH ORDINALITY AS x(f, o)
                     WHERE p ? f ORDER BY o);
    IF cardinality(present) = 0 THEN
        RETURN herald._legacy_reject('MissingRegistration', 'legacy',
            'no target: give one of to, registration_ids, condition or notification_key');
    END IF;
    IF cardinality(present) > 1 THEN
        RETURN herald._legacy_reject('InvalidParameters', 'legacy.' || present[2],
            'conflicting targets: ' || array_to_string(present, ', ') || '; give exactly one');
    END IF;
    target_field := present[1];
    v := p -> target_field;
    IF target_field = 'registration_ids' THEN
        IF jsonb_typeof(v) <> 'array' THEN
            RETURN herald._legacy_reject('InvalidJson', 'legacy.registration_ids',
                'must be an array of registration tokens, not ' || jsonb_typeof(v));
        END IF;
        IF jsonb_array_length(v) = 0 THEN
            RETURN herald._legacy_reject('InvalidParameters', 'legacy.registration_ids', 'must hold at least 1 registration token');
        END IF;
        IF jsonb_array_length(v) > 1000 THEN
            RETURN herald._legacy_reject('InvalidParameters', 'legacy.registration_ids',
                'holds ' || jsonb_array_length(v) || ' registration tokens; at most 1000 are allowed');
        END IF;
        SELECT e.o - 1, e.value INTO i, args FROM jsonb_array_elements(v) WITH ORDINALITY AS e(value, o)
        WHERE jsonb_typeof(e.value) <> 'string' OR e.value = '""' ORDER BY e.o LIMIT 1;
        IF FOUND THEN
            IF jsonb_typeof(args) <> 'string' THEN
                RETURN herald._legacy_reject('InvalidJson', 'legacy.registration_ids[' || i || ']', 'must be a string, not ' || jsonb_typeof(args));
            END IF;
            RETURN herald._legacy_reject('MissingRegistration', 'legacy.registration_ids[' || i || ']', 'is empty');
        END IF;
        targets := (SELECT jsonb_agg(jsonb_build_array('token', e.value) ORDER BY e.o)
                    FROM jsonb_array_elements(v) WITH ORDINALITY AS e(value, o));
    ELSE
        IF jsonb_typeof(v) <> 'string' THEN
            RETURN herald._legacy_reject('InvalidJson', 'legacy.' || target_field, 'must be a string, not ' || jsonb_typeof(v));
        END IF;
        t := v #>> '{}';
        IF t = '' THEN
            RETURN herald._legacy_reject('MissingRegistration', 'legacy.' || target_field, 'is empty');
        END IF;
        IF target_field = 'condition' THEN
            IF herald._legacy_condition(t) <> t THEN
                notes := notes || to_jsonb('legacy.condition normalized to ' || to_json(herald._legacy_condition(t))::text);
            END IF;
            targets := jsonb_build_array(jsonb_build_array('condition', herald._legacy_condition(t)));
        ELSIF target_field = 'notification_key' THEN
            notes := notes || to_jsonb('legacy.notification_key is deprecated: sent as message.token'::text);
            targets := jsonb_build_array(jsonb_build_array('token', t));
        ELSIF starts_with(t, '/topics/') THEN
            t := substr(t, 9);
            IF t !~ '^[a-zA-Z0-9._~%-]+$' THEN
                RETURN herald._legacy_reject('InvalidParameters', 'legacy.to',
                    'topic name ' || to_json(t)::text || ' must match [a-zA-Z0-9-_.~%]+');
            END IF;
            targets := jsonb_build_array(jsonb_build_array('topic', t));
        ELSE
            targets := jsonb_build_array(jsonb_build_array('token', t));
        END IF;
    END IF;

    -- Step 4: options, in Table 1 order (docs/legacy.md 4.4).
    has_notification := jsonb_typeof(p -> 'notification') = 'object'
        AND EXISTS (SELECT 1 FROM jsonb_each(p -> 'notification') AS e WHERE jsonb_typeof(e.value) <> 'null');
    IF p ? 'collapse_key' THEN
        v := p -> 'collapse_key';
        IF jsonb_typeof(v) <> 'string' THEN
            RETURN herald._legacy_reject('InvalidJson', 'legacy.collapse_key', 'must be a string, not ' || jsonb_typeof(v));
        END IF;
        IF v = '""' THEN
            RETURN herald._legacy_reject('InvalidParameters', 'legacy.collapse_key', 'must be a non-empty string');
        END IF;
        android := android || jsonb_build_object('collapse_key', v);
        IF octet_length(v #>> '{}') <= 64 THEN
            apns_headers := apns_headers || jsonb_build_object('apns-collapse-id', v);
        ELSE
            notes := notes || to_jsonb('legacy.collapse_key is over 64 bytes: sent to Android only (apns-collapse-id holds at most 64)'::text);
        END IF;
    END IF;
    IF p ? 'priority' THEN
        v := p -> 'priority';
        IF v = '"high"' THEN
            android := android || '{"priority": "HIGH"}';
            IF has_notification THEN
                apns_headers := apns_headers || '{"apns-priority": "10"}';
            ELSE
                apns_headers := apns_headers || '{"apns-priority": "5"}';
                notes := notes || to_jsonb('legacy.priority "high" without a notification: apns-priority 5, since APNs refuses 10 for a background push'::text);
            END IF;
        ELSIF v = '"normal"' THEN
            android := android || '{"priority": "NORMAL"}';
            apns_headers := apns_headers || '{"apns-priority": "5"}';
        ELSE
            RETURN herald._legacy_reject('InvalidParameters', 'legacy.priority',
                'must be "high" or "normal", not ' || herald._legacy_shown(v));
        END IF;
    END IF;
    FOREACH t IN ARRAY ARRAY['content_available', 'mutable_content'] LOOP
        IF p ? t THEN
            IF herald._legacy_flag(p -> t) IS NULL THEN
                RETURN herald._legacy_reject('InvalidJson', 'legacy.' || t,
                    'must be true or false (or 1 or 0), not ' || herald._legacy_shown(p -> t));
            END IF;
            IF herald._legacy_flag(p -> t) THEN
                aps := aps || jsonb_build_object(replace(t, '_', '-'), 1);
            END IF;
        END IF;
    END LOOP;
    IF p ? 'time_to_live' THEN
        v := p -> 'time_to_live';
        IF jsonb_typeof(v) <> 'number' THEN
            RETURN herald._legacy_reject('InvalidJson', 'legacy.time_to_live', 'must be a number of seconds, not ' || jsonb_typeof(v));
        END IF;
        n := (v #>> '{}')::numeric;
        IF n <> trunc(n) OR n < 0 OR n > 2419200 THEN
            RETURN herald._legacy_reject('InvalidTtl', 'legacy.time_to_live',
                'must be a whole number of seconds from 0 to 2419200 (4 weeks), not ' || (v #>> '{}'));
        END IF;
        android := android || jsonb_build_object('ttl', trunc(n)::bigint || 's');
        -- 0 is APNs' "now or never", exactly legacy TTL 0; anything else is an absolute time.
        apns_headers := apns_headers || jsonb_build_object('apns-expiration',
            CASE WHEN n = 0 THEN '0' ELSE (now_seconds + trunc(n)::bigint)::text END);
        webpush_headers := webpush_headers || jsonb_build_object('TTL', trunc(n)::bigint::text);
    END IF;
    IF p ? 'restricted_package_name' THEN
        v := p -> 'restricted_package_name';
        IF jsonb_typeof(v) <> 'string' THEN
            RETURN herald._legacy_reject('InvalidJson', 'legacy.restricted_package_name', 'must be a string, not ' || jsonb_typeof(v));
        END IF;
        IF v = '""' THEN
            RETURN herald._legacy_reject('InvalidParameters', 'legacy.restricted_package_name', 'must be a non-empty string');
        END IF;
        android := android || jsonb_build_object('restricted_package_name', v);
    END IF;
    IF p ? 'dry_run' THEN
        validate_only := herald._legacy_flag(p -> 'dry_run');
        IF validate_only IS NULL THEN
            RETURN herald._legacy_reject('InvalidJson', 'legacy.dry_run',
                'must be true or false (or 1 or 0), not ' || herald._legacy_shown(p -> 'dry_run'));
        END IF;
    END IF;

    -- Step 5: data.
    IF p ? 'data' THEN
        v := p -> 'data';
        IF jsonb_typeof(v) <> 'object' THEN
            RETURN herald._legacy_reject('InvalidJson', 'legacy.data', 'must be an object, not ' || jsonb_typeof(v));
        END IF;
        FOR m IN SELECT e.key, e.value FROM jsonb_each(v) WITH ORDINALITY AS e(key, value, o) ORDER BY e.o LOOP
            IF m.key IN ('from', 'message_type', 'notification') OR starts_with(m.key, 'google') OR starts_with(m.key, 'gcm') THEN
                RETURN herald._legacy_reject('InvalidDataKey', 'legacy.data.' || m.key,
                    to_json(m.key)::text || ' is reserved by FCM (from, message_type, notification, google*, gcm*)');
            END IF;
            IF m.key = ANY (parameters) THEN
                notes := notes || to_jsonb('legacy.data.' || m.key || ' is a legacy parameter name: v1 delivers it as ordinary data');
            END IF;
            CASE jsonb_typeof(m.value)
            WHEN 'string' THEN
                data := data || jsonb_build_object(m.key, m.value);
            WHEN 'null' THEN
                RETURN herald._legacy_reject('InvalidParameters', 'legacy.data.' || m.key, 'null has no string form');
            ELSE
                data := data || jsonb_build_object(m.key, herald._legacy_compact(m.value));
                notes := notes || to_jsonb('legacy.data.' || m.key || ': ' || jsonb_typeof(m.value) || ' sent as its JSON text');
            END CASE;
        END LOOP;
    END IF;

    -- Step 6: notification.
    IF p ? 'notification' THEN
        v := p -> 'notification';
        IF jsonb_typeof(v) <> 'object' THEN
            RETURN herald._legacy_reject('InvalidJson', 'legacy.notification', 'must be an object, not ' || jsonb_typeof(v));
        END IF;
        SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}') INTO fields
        FROM jsonb_each(v) AS e WHERE jsonb_typeof(e.value) <> 'null';
        IF fields = '{}' THEN
            notes := notes || to_jsonb('legacy.notification is empty: dropped'::text);
        END IF;
        FOR m IN SELECT e.key, e.value FROM jsonb_each(fields) WITH ORDINALITY AS e(key, value, o) ORDER BY e.o LOOP
            t := 'legacy.notification.' || m.key;
            IF NOT m.key = ANY (notification_keys) THEN
                RETURN herald._legacy_reject('InvalidParameters', t, to_json(m.key)::text || ' is not a legacy notification key (docs/legacy.md Tables 2a-2c)');
            END IF;
            IF m.key = 'sound' THEN
                IF jsonb_typeof(m.value) = 'string' THEN
                    android_notification := android_notification || jsonb_build_object('sound', m.value);
                    aps := aps || jsonb_build_object('sound', m.value);
                ELSIF jsonb_typeof(m.value) = 'object' THEN
                    aps := aps || jsonb_build_object('sound', m.value);
                    notes := notes || to_jsonb('legacy.notification.sound is an object (an APNs critical-alert sound): sent to APNs only'::text);
                ELSE
                    RETURN herald._legacy_reject('InvalidJson', t, 'must be a string or an object, not ' || jsonb_typeof(m.value));
                END IF;
            ELSIF m.key = 'badge' THEN
                IF jsonb_typeof(m.value) NOT IN ('string', 'number') OR (m.value #>> '{}') !~ '^[0-9]+$' THEN
                    RETURN herald._legacy_reject('InvalidParameters', t,
                        'must be a whole number of 0 or more (a string of digits or a JSON integer), not ' || herald._legacy_shown(m.value));
                END IF;
                aps := aps || jsonb_build_object('badge', (m.value #>> '{}')::numeric);
            ELSIF m.key IN ('body_loc_args', 'title_loc_args') THEN
                IF jsonb_typeof(m.value) = 'array' THEN
                    args := m.value;
                ELSIF jsonb_typeof(m.value) = 'string' THEN
                    BEGIN
                        args := (m.value #>> '{}')::jsonb;
                    EXCEPTION WHEN invalid_text_representation THEN
                        args := NULL;
                    END;
                    IF jsonb_typeof(args) IS DISTINCT FROM 'array' THEN
                        RETURN herald._legacy_reject('InvalidParameters', t,
                            'must hold a JSON array such as ["Jenna","Frank"], not ' || herald._legacy_shown(m.value));
                    END IF;
                ELSE
                    RETURN herald._legacy_reject('InvalidJson', t, 'must be a JSON array or a string holding one, not ' || jsonb_typeof(m.value));
                END IF;
                strings := '[]';
                FOR arg IN SELECT e.value, e.o FROM jsonb_array_elements(args) WITH ORDINALITY AS e(value, o) ORDER BY e.o LOOP
                    IF jsonb_typeof(arg.value) NOT IN ('string', 'number', 'boolean') THEN
                        RETURN herald._legacy_reject('InvalidParameters', t || '[' || (arg.o - 1) || ']',
                            'must be a string, number or boolean, not ' || jsonb_typeof(arg.value));
                    END IF;
                    strings := strings || to_jsonb(arg.value #>> '{}');
                END LOOP;
                android_notification := android_notification || jsonb_build_object(m.key, strings);
                alert := alert || jsonb_build_object(CASE m.key WHEN 'body_loc_args' THEN 'loc-args' ELSE 'title-loc-args' END, strings);
            ELSE
                IF jsonb_typeof(m.value) <> 'string' THEN
                    RETURN herald._legacy_reject('InvalidJson', t, 'must be a string, not ' || jsonb_typeof(m.value));
                END IF;
                CASE m.key
                WHEN 'click_action' THEN
                    android_notification := android_notification || jsonb_build_object('click_action', m.value);
                    aps := aps || jsonb_build_object('category', m.value);
                    IF starts_with(m.value #>> '{}', 'https://') THEN
                        webpush_options := webpush_options || jsonb_build_object('link', m.value);
                    END IF;
                WHEN 'subtitle' THEN alert := alert || jsonb_build_object('subtitle', m.value);
                WHEN 'title', 'body', 'image' THEN notification := notification || jsonb_build_object(m.key, m.value);
                WHEN 'android_channel_id' THEN android_notification := android_notification || jsonb_build_object('channel_id', m.value);
                WHEN 'icon' THEN
                    android_notification := android_notification || jsonb_build_object('icon', m.value);
                    webpush_notification := webpush_notification || jsonb_build_object('icon', m.value);
                WHEN 'tag', 'color' THEN android_notification := android_notification || jsonb_build_object(m.key, m.value);
                WHEN 'body_loc_key' THEN
                    android_notification := android_notification || jsonb_build_object('body_loc_key', m.value);
                    alert := alert || jsonb_build_object('loc-key', m.value);
                WHEN 'title_loc_key' THEN
                    android_notification := android_notification || jsonb_build_object('title_loc_key', m.value);
                    alert := alert || jsonb_build_object('title-loc-key', m.value);
                END CASE;
            END IF;
        END LOOP;
        IF fields ? 'body_loc_args' AND NOT fields ? 'body_loc_key' THEN
            RETURN herald._legacy_reject('InvalidParameters', 'legacy.notification.body_loc_args', 'needs legacy.notification.body_loc_key');
        END IF;
        IF fields ? 'title_loc_args' AND NOT fields ? 'title_loc_key' THEN
            RETURN herald._legacy_reject('InvalidParameters', 'legacy.notification.title_loc_args', 'needs legacy.notification.title_loc_key');
        END IF;
        -- An aps.alert object overrides the common title and body on iOS, so it carries them too.
        IF alert <> '{}' THEN
            alert := alert || jsonb_strip_nulls(jsonb_build_object('title', notification -> 'title', 'body', notification -> 'body'));
        END IF;
    END IF;

    -- Step 7: one message per target, then the v1 rules.
    IF notification <> '{}' THEN shared := shared || jsonb_build_object('notification', notification); END IF;
    IF data <> '{}' THEN shared := shared || jsonb_build_object('data', data); END IF;
    IF android_notification <> '{}' THEN android := android || jsonb_build_object('notification', android_notification); END IF;
    IF android <> '{}' THEN shared := shared || jsonb_build_object('android', android); END IF;
    IF alert <> '{}' THEN aps := aps || jsonb_build_object('alert', alert); END IF;
    IF apns_headers <> '{}' THEN apns := apns || jsonb_build_object('headers', apns_headers); END IF;
    IF aps <> '{}' THEN apns := apns || jsonb_build_object('payload', jsonb_build_object('aps', aps)); END IF;
    IF apns <> '{}' THEN shared := shared || jsonb_build_object('apns', apns); END IF;
    IF webpush_headers <> '{}' THEN webpush := webpush || jsonb_build_object('headers', webpush_headers); END IF;
    IF webpush_notification <> '{}' THEN webpush := webpush || jsonb_build_object('notification', webpush_notification); END IF;
    IF webpush_options <> '{}' THEN webpush := webpush || jsonb_build_object('fcm_options', webpush_options); END IF;
    IF webpush <> '{}' THEN shared := shared || jsonb_build_object('webpush', webpush); END IF;

    messages := (SELECT jsonb_agg(jsonb_build_object(x.value ->> 0, x.value -> 1) || shared ORDER BY x.o)
                 FROM jsonb_array_elements(targets) WITH ORDINALITY AS x(value, o));
    -- The messages differ only in their token, which step 3 checked, and the v1 rules ask nothing
    -- more of a token than being a non-empty string: the first message speaks for all.
    issue := (herald.validate_message(messages -> 0))[1];
    IF issue IS NOT NULL THEN
        issue_field := split_part(issue, ':', 1);
        RETURN herald._legacy_reject(
            CASE WHEN issue ~ ' payload is [0-9]+ bytes, over the [0-9]+-byte limit' THEN 'MessageTooBig'
                 WHEN issue ~ ' is a reserved key$| which FCM reserves$' THEN 'InvalidDataKey'
                 ELSE 'InvalidParameters' END,
            coalesce((SELECT s.legacy FROM (VALUES
                (1, 'message.notification.title', 'legacy.notification.title'),
                (2, 'message.notification.body', 'legacy.notification.body'),
                (3, 'message.notification.image', 'legacy.notification.image'),
                (4, 'message.android.notification.channel_id', 'legacy.notification.android_channel_id'),
                (5, 'message.android.notification.icon', 'legacy.notification.icon'),
                (6, 'message.webpush.notification.icon', 'legacy.notification.icon'),
                (7, 'message.android.notification.sound', 'legacy.notification.sound'),
                (8, 'message.android.notification.tag', 'legacy.notification.tag'),
                (9, 'message.android.notification.color', 'legacy.notification.color'),
                (10, 'message.android.notification.click_action', 'legacy.notification.click_action'),
                (11, 'message.webpush.fcm_options.link', 'legacy.notification.click_action'),
                (12, 'message.android.notification.body_loc_key', 'legacy.notification.body_loc_key'),
                (13, 'message.android.notification.body_loc_args', 'legacy.notification.body_loc_args'),
                (14, 'message.android.notification.title_loc_key', 'legacy.notification.title_loc_key'),
                (15, 'message.android.notification.title_loc_args', 'legacy.notification.title_loc_args'),
                (16, 'message.apns.payload', 'legacy.notification'),
                (17, 'message.android.collapse_key', 'legacy.collapse_key'),
                (18, 'message.apns.headers.apns-collapse-id', 'legacy.collapse_key'),
                (19, 'message.android.ttl', 'legacy.time_to_live'),
                (20, 'message.android.restricted_package_name', 'legacy.restricted_package_name'),
                (21, 'message.data', 'legacy.data'),
                (22, 'message.topic', 'legacy.to'),
                (23, 'message.condition', 'legacy.condition')) AS s(o, v1, legacy)
                WHERE issue_field = s.v1 OR starts_with(issue_field, s.v1 || '.') OR starts_with(issue_field, s.v1 || '[')
                ORDER BY s.o LIMIT 1), 'legacy'),
            'the translated message breaks a v1 rule: ' || issue);
    END IF;
    RETURN jsonb_build_object('validate_only', validate_only, 'messages', messages, 'notes', notes);
END
$fn$;
