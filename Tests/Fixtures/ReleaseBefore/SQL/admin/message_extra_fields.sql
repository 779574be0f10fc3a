-- Every path of the operator's allow-list of message fields.
SELECT path FROM herald.message_extra_fields ORDER BY path
