-- --with quiet-hours: quiet hours on queue 'default' from $1 to $2 (intervals) after now, UTC.
SELECT herald.set_quiet_hours('default', (now() AT TIME ZONE 'UTC' + $1::interval)::time,
                              (now() AT TIME ZONE 'UTC' + $2::interval)::time)
