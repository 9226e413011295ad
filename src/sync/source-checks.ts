import type { KeyKind } from '../config/key-kind.js';
import { ConfigError } from '../errors.js';
import type { Logger } from '../logger.js';
import { shellQuote } from '../shell-quote.js';
import { recordKeyKind } from '../store/cursor.js';
import type { Store } from '../store/db.js';
import { migrate, schemaState } from '../store/migrate.js';
import { assertEventWithinRetention } from '../store/retention-guard.js';

/** Refuses an outdated schema, or migrates it with `autoMigrate`. */
export async function checkSchemaOf(store: Store, autoMigrate: boolean, log: Logger): Promise<void> {
  const state = await schemaState(store);
  if (state.pending.length === 0) return;
  if (!autoMigrate && state.current === null) {
    // Often a misspelt DATABASE_SCHEMA: migrating would make a second, empty one.
    throw new ConfigError(
      `the schema "${store.schema}" (DATABASE_SCHEMA) has no feedsync tables yet: check DATABASE_SCHEMA ` +
        '(a misspelt name is a new, empty schema), or run "feedsync migrate" to create them there',
      'SCHEMA_MISSING',
    );
  }
  if (!autoMigrate) {
    throw new ConfigError(
      `the schema "${store.schema}" is not up to date (pending: ${state.pending.join(', ')}); run "feedsync migrate" or "feedsync sync --migrate"`,
      'SCHEMA_OUTDATED',
    );
  }
  const { applied } = await migrate(store);
  log.info({ applied }, 'migrated');
}

/**
 * Refuses a cursor built with another filter or another account's key; a cursor from
 * before keys were remembered learns this one's kind.
 */
export async function checkCursor(
  store: Store,
  settings: { source: string; types: readonly string[] | null; keyKind: KeyKind | null },
  cursor: { types: readonly string[] | null; keyKind: KeyKind | null },
): Promise<void> {
  const { source, types, keyKind } = settings;
  checkTypes(source, cursor.types, types);
  checkKeyKind(source, cursor.keyKind, keyKind);
  if (cursor.keyKind === null && keyKind !== null) await recordKeyKind(store, source, keyKind);
}

/** Under a retention, reconcile starts from a stored event inside it: the feed's start would bring back pruned events. */
export async function checkReconcileStart(
  store: Store,
  settings: { source: string; eventsRetentionDays: number | null },
  from: string | null,
): Promise<void> {
  const days = settings.eventsRetentionDays;
  if (days === null) return;
  if (from === null) {
    throw new ConfigError(
      `reconcile: with EVENTS_RETENTION_DAYS (${days}) set, give --from <event-id> (a stored event inside the retention): ` +
        'from the start of the feed, events already pruned would be stored and enqueued again as new',
      'BEFORE_RETENTION',
    );
  }
  await assertEventWithinRetention(store, settings.source, from, '--from', days);
}

/**
 * A key of the other kind than the cursor's is another account: its feed would be
 * mixed into this source's events and records. Refuse, and say how to mean it.
 */
function checkKeyKind(source: string, stored: KeyKind | null, wanted: KeyKind | null): void {
  if (stored === null || wanted === null || stored === wanted) return;
  throw new ConfigError(
    `FEED_API_KEY is a ${wanted} key, but the cursor of source "${source}" was built with a ${stored} key: ` +
      `another account. Put the ${stored} key back, or give this account a FEED_SOURCE of its own; to switch ` +
      `this source on purpose, "feedsync cursor reset --source ${shellQuote(source)} --allow-key-change" ` +
      '(its feed is read from the start; events stored under the same ids with other content stop the run)',
    'KEY_KIND_CHANGED',
  );
}

/** A filter that differs from the cursor's would skip or mix events: refuse, and say how to reset. */
function checkTypes(
  source: string,
  stored: readonly string[] | null,
  wanted: readonly string[] | null,
): void {
  const a = stored ? [...stored].sort().join(',') : '*';
  const b = wanted ? [...wanted].sort().join(',') : '*';
  if (a === b) return;
  throw new ConfigError(
    `FEED_TYPES (${b === '*' ? 'all types' : b}) differs from the filter the cursor of source "${source}" was built with (${a === '*' ? 'all types' : a}). ` +
      `Set FEED_TYPES back, or start this source over with "feedsync cursor reset --source ${shellQuote(source)}" (events are re-read and de-duplicated), or use another FEED_SOURCE.`,
    'TYPES_MISMATCH',
  );
}
