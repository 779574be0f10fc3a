-- Campaigns with nothing left to send are finished.
UPDATE herald.campaigns c SET state = 'finished', finished_at = now()
WHERE c.state = 'running'
  AND NOT EXISTS (SELECT 1 FROM herald.jobs j WHERE j.campaign_id = c.id AND j.state IN ('scheduled', 'available', 'running'))
