-- Herald: validation of FCM messages inside PostgreSQL.
--
-- herald.validate_message(message jsonb) returns text[]: the same issue descriptions, in the
-- same order, as the worker's Swift MessageValidator, so an application can refuse a bad
-- message inside its own transaction, e.g.
--
--     INSERT INTO herald.jobs (message) SELECT $1
--     WHERE cardinality(herald.validate_message($1)) = 0;
--
-- Both validators interpret one rule list, Sources/FCM/Rules/message-rules.json. The binary
-- carries it (FCM's MessageRules.json) and `herald migrate` stores it on every run with
--
--     SELECT herald.load_message_rules($1::jsonb)      -- $1 = MessageRules.json
--
-- so the rules in the database are those of the binary that last migrated it. The interpreter
-- (validate_message, load_message_rules and the _mv_* helpers) lives in
-- Sources/Queue/SQL/functions/, one file per function; a new rule kind changes those files.
--
-- Everything here runs inside users' transactions: validate_message only reads, no dynamic SQL,
-- every name schema-qualified, search_path pinned on the functions that run queries (the small
-- SQL helpers inline into them), nothing that depends on the database's locale (byte order via
-- COLLATE "C", explicit character classes instead of \d or \s). Roles that call it need USAGE
-- on schema herald and SELECT on herald.message_rules and herald.message_rule_steps.

CREATE TABLE IF NOT EXISTS herald.message_rules (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    format integer NOT NULL,
    definition jsonb NOT NULL,
    loaded_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE herald.message_rules IS
    'The FCM message rules herald.validate_message applies; written by herald migrate (one row).';

-- The rules of herald.message_rules one per row with their paths split, so validate_message
-- finds the rules that apply to a message (those whose parent object exists) in one query.
CREATE TABLE IF NOT EXISTS herald.message_rule_steps (
    position integer PRIMARY KEY,
    path text[] NOT NULL,
    parent text[] NOT NULL,
    field text NOT NULL,
    presence text,
    types text[],
    check_kind text,
    has_when boolean NOT NULL,
    rule jsonb NOT NULL
);
