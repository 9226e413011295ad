/** Limits that the configuration, the store and a consumer's options share: each written once. */

/**
 * The longest delay Node's timers keep: a larger one fires after 1 ms (and from 2^32 a
 * RangeError), so a duration beyond it would end a run at once or never let a lease go.
 */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * Ten years of hours: the longest retention in hours (OUTBOX_RETENTION_HOURS, a consumer's
 * inbox). Pruning turns it into an interval in ms (an int4 parameter, and the events' guard
 * adds it to EVENTS_RETENTION_DAYS), which a larger value overflows on every round; and past
 * ten years it is a slip of the unit.
 */
export const MAX_RETENTION_HOURS = 87_600;

/**
 * A plain lowercase SQL identifier (at most 63 bytes, Postgres's limit): what a schema
 * name must be to be quoted safely into SQL (DATABASE_SCHEMA, the queues' schema, a
 * consumer's inbox schema).
 */
export const SQL_IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;
