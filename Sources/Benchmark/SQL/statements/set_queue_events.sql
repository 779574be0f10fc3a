-- --with events: a herald.events row per job of queue 'default' ($1 true) or none.
SELECT herald.set_queue_events('default', $1)
