-- feedsync schema, version 15: the names `feedsync sources rename` and `sources retire`
-- took out of the fleet. A replica whose sources file still names one (its ConfigMap not
-- rolled out yet) would make its cursor again at the start of the feed and store the
-- whole feed a second time; a source's first turn reads this table instead and refuses
-- the name, saying why. `sources reuse` lifts the mark; a rename into the name lifts it.
CREATE TABLE retired_sources (
  source text COLLATE "C" PRIMARY KEY,
  -- The source's name now, for a rename; NULL for a retire.
  renamed_to text COLLATE "C",
  retired_at timestamptz NOT NULL DEFAULT now()
);
