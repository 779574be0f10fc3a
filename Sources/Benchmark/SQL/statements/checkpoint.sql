-- The checkpoint the server would have made by then, so it is not counted in a measured phase.
CHECKPOINT
