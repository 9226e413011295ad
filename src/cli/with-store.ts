import type { Config } from '../config/config-type.js';
import { ConfigError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/db.js';

/** Opens the store for one command, checks the schema is migrated, and closes it after. */
export async function withStore<T>(
  config: Config,
  logger: Logger,
  fn: (store: Store) => Promise<T>,
): Promise<T> {
  const { storeFor } = await import('../compose/parts.js');
  const { schemaState } = await import('../store/migrate.js');
  const store = storeFor(config, logger);
  try {
    const state = await schemaState(store);
    if (state.current === null) {
      // Often a DATABASE_SCHEMA that names another schema than meant: migrate would make it.
      throw new ConfigError(
        `the schema "${store.schema}" (DATABASE_SCHEMA) has no feedsync tables yet: check DATABASE_SCHEMA, ` +
          'or run "feedsync migrate" to create them there',
        'SCHEMA_MISSING',
      );
    }
    if (state.pending.length > 0) {
      throw new ConfigError(
        `the schema "${store.schema}" is not up to date; run "feedsync migrate"`,
        'SCHEMA_OUTDATED',
      );
    }
    return await fn(store);
  } finally {
    await store.close();
  }
}
