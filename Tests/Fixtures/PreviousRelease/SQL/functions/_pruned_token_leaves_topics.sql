-- A token FCM reported unregistered leaves every topic (FCM drops its subscriptions itself).
CREATE OR REPLACE FUNCTION herald._pruned_token_leaves_topics() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    DELETE FROM herald.topic_subscriptions s WHERE s.token = NEW.token;
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE TRIGGER pruned_tokens_leave_topics AFTER INSERT OR UPDATE OF token ON herald.pruned_tokens
    FOR EACH ROW EXECUTE FUNCTION herald._pruned_token_leaves_topics();
