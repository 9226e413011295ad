-- feedsync schema, version 16: the request budget of each account, shared by every
-- replica (docs/DEPLOYMENT.md, "The request budget"). One row per account, named by a
-- SHA-256 of its API key (never the key). next_at is the first moment no replica has
-- reserved yet: a replica takes a batch of request slots, 1/rate apart, by moving it
-- forward in one statement, so the requests of every replica together keep the rate.
CREATE TABLE request_budgets (
  account text PRIMARY KEY,
  next_at timestamptz NOT NULL
);
