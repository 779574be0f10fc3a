-- Empties herald.events before a phase of a run --with events.
TRUNCATE herald.events
