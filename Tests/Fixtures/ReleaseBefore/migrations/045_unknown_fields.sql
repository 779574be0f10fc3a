-- Herald: unknown FCM field names are caught before sending, with an allow-list the operator
-- extends when FCM adds a field.
--
-- The rule list (Sources/FCM/Rules/message-rules.json) gains the check `known_fields`: an
-- object such as `android` names its members, and any other member is reported by path with
-- the nearest known name, e.g. `message.android.tll: unknown field; did you mean "ttl"?`.
-- This migration teaches the interpreter of 020 that check: load_message_rules accepts it and
-- validate_message (replaced whole, unchanged otherwise) applies it.
--
-- herald.message_extra_fields is the allow-list. A row `message.android.new_option` lets that
-- member through in the object the rules otherwise close (what is inside it is not checked).
-- validate_message reads the table on every call; each `herald work` process reads it when it
-- starts, so restart the workers after adding a row. Roles that call validate_message also need
-- SELECT on herald.message_extra_fields.

CREATE TABLE IF NOT EXISTS herald.message_extra_fields (
    path text PRIMARY KEY
        CONSTRAINT message_extra_fields_path CHECK (path ~ '^message(\.[A-Za-z0-9_-]+)+$'),
    note text,
    added_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE herald.message_extra_fields IS
    'Message fields allowed beyond Herald''s rules (e.g. message.android.new_option, for a field FCM added after this release); workers read it when they start.';
