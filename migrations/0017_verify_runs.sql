-- feedsync schema, version 17: the last `feedsync verify` of each source, for `status`.
-- One row per source, replaced by every run that finished: what a CronJob's alert and
-- an operator ask is whether the last proof of the mirror passed, not its history.
CREATE TABLE verify_runs (
  source text COLLATE "C" PRIMARY KEY,
  finished_at timestamptz NOT NULL,
  -- Events the feed served that the store did not have (nor had pruned by retention).
  missing integer NOT NULL,
  -- Events stored under the feed's id with other content (type, created_at or data).
  differing integer NOT NULL,
  -- Of the missing, those --repair stored and handed over.
  repaired integer NOT NULL DEFAULT 0,
  -- Events read from the feed and compared.
  checked bigint NOT NULL,
  -- Nothing missing or differing: the run exited 0.
  ok boolean NOT NULL
);
