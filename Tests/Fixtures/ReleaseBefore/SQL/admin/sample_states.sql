-- Counts per queue and state in a $1 % block sample of herald.jobs, with the sample's size.
SELECT queue, state, count(*), sum(count(*)) OVER () FROM herald.jobs TABLESAMPLE SYSTEM ($1::float4) GROUP BY 1, 2
