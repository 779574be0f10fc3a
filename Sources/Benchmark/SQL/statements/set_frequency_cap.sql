-- --with caps: a frequency cap of $1 sends per $2 (an interval) per token on queue 'default'.
SELECT herald.set_frequency_cap('default', $1, $2::interval)
