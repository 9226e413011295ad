/**
 * Every `code` a feedsync error can carry: a closed set, so a script can match on it
 * and the compiler refuses a code that is not listed here. docs/DESIGN.md ("Error
 * codes") gives each with its exit code.
 */
export type ErrorCode =
  // Configuration and usage (exit 2).
  | 'CONFIG_INVALID'
  | 'USAGE'
  | 'BAD_BASE_URL'
  | 'NO_API_KEY'
  | 'BAD_LISTEN_ADDRESS'
  | 'PORT_CLASH'
  | 'REDIS_NO_HASH_TAG'
  | 'SCHEMA_MISSING'
  | 'SCHEMA_OUTDATED'
  | 'TYPES_MISMATCH'
  | 'UNKNOWN_CURSOR'
  | 'UNKNOWN_EVENT_ID'
  | 'BEFORE_RETENTION'
  | 'DEMO_REFUSED'
  // The service and its feed.
  | 'UNAUTHORIZED'
  | 'RATE_LIMITED'
  | 'SERVER_ERROR'
  | 'CONFLICT'
  | 'REQUEST_REJECTED'
  | 'TIMEOUT'
  | 'NETWORK'
  | 'TLS'
  | 'RETRY_WAIT_TOO_LONG'
  | 'RESPONSE_TOO_LARGE'
  | 'NOT_JSON'
  | 'BAD_RESPONSE'
  | 'WEBHOOK_NOT_FOUND'
  | 'NO_LIST'
  | 'TOO_MANY'
  | 'BAD_NEXT_AFTER'
  | 'CURSOR_LOOP'
  | 'CURSOR_STUCK'
  // Sources, Postgres and the outbox.
  | 'KEY_FILE'
  | 'SOURCE_HELD'
  | 'MIGRATION_FAILED'
  | 'PG_CONNECT_TIMEOUT'
  | 'PG_CONNECT_FAILED'
  | 'DEMO_POSTGRES_FAILED'
  | 'UNKNOWN_EVENT'
  | 'PORT_IN_USE'
  // Redis (a RedisError's `redisCode` keeps Redis's own code: OOM, READONLY…).
  | 'REDIS_ERROR'
  | 'REDIS_TIMEOUT'
  | 'REDIS_STOPPING'
  | 'REDIS_SLOT_MOVED'
  | 'REDIS_NO_MASTER'
  | 'REDIS_NOT_REPLICATED'
  | 'CLUSTERDOWN'
  // feedsync/consumer.
  | 'CONSUMER_BAD_OPTION'
  | 'CONSUMER_NOT_MIGRATED'
  | 'CONSUMER_BAD_EVENT'
  | 'CONSUMER_CLOSED'
  | 'CONSUMER_RUNNING';
