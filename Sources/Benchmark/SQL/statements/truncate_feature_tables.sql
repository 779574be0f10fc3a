-- --with: each run starts from empty frequency-cap counts and delivery events.
TRUNCATE herald.token_sends, herald.events
