-- herald grant: give role $1 the privileges of kind $2 (producer, reader, operator).
SELECT herald.grant_role($1, $2)
