-- Herald: one name for the pause of a whole FCM project.
--
-- A project is paused after FCM answers that the project's quota is used up, or while FCM does
-- not answer at all (the circuit, reason FCM_UNREACHABLE). Every pool of the project stops
-- claiming until paused_until. The table was named for the sender; it is the project's pause.

ALTER TABLE herald.sender_pauses RENAME TO project_pauses;
ALTER INDEX herald.sender_pauses_pkey RENAME TO project_pauses_pkey;
