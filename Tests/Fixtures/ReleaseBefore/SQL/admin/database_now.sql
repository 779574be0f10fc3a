-- The database's clock, as text a later statement can take back as timestamptz.
SELECT now()::text
