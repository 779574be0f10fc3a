-- After the definitions: no herald function for PUBLIC, and each role recorded by
-- herald.grant_role given its kind again (what later migrations added included).
SELECT herald._apply_role_grants()
