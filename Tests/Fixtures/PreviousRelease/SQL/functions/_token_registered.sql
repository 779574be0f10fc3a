-- A token registered again is no longer pruned.
CREATE OR REPLACE FUNCTION herald._token_registered() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM herald.pruned_tokens p WHERE p.token = NEW.token;
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER device_tokens_registered AFTER INSERT ON herald.device_tokens
    FOR EACH ROW EXECUTE FUNCTION herald._token_registered();
