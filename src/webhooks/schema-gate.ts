import { ConfigError } from '../errors.js';
import type { Store } from '../store/db.js';
import { schemaState } from '../store/migrate.js';

/** Whether the schema is migrated, asked of Postgres until the answer is yes. */
export interface SchemaGate {
  /** Resolves once the schema is current; throws SCHEMA_OUTDATED, or Postgres's own error. */
  ensure(): Promise<void>;
  /** True once a check found the schema current. */
  readonly current: boolean;
}

/**
 * The receiver may start while Postgres is down (it answers 503 and is not ready);
 * the first check that reaches Postgres decides. A current schema is never asked
 * again; concurrent callers share one check.
 */
export function schemaGate(store: Store): SchemaGate {
  let current = false;
  let pending: Promise<void> | null = null;
  const check = async (): Promise<void> => {
    const state = await schemaState(store);
    if (state.pending.length > 0) {
      throw new ConfigError(
        `the schema "${store.schema}" is not up to date (pending: ${state.pending.join(', ')}); run "feedsync migrate"`,
        'SCHEMA_OUTDATED',
      );
    }
    current = true;
  };
  return {
    ensure() {
      if (current) return Promise.resolve();
      pending ??= check().finally(() => {
        pending = null;
      });
      return pending;
    },
    get current() {
      return current;
    },
  };
}
