import type { Config } from '../config/config-type.js';
import { configForSource } from '../config/source-config.js';
import { nearest } from '../edit-distance.js';
import { ConfigError } from '../errors.js';
import type { Logger } from '../logger.js';

/** Postgres's SQLSTATE for a relation that does not exist. */
const UNDEFINED_TABLE = '42P01';

/**
 * The config of the source a `--source` names (FEED_SOURCE when it names none), once
 * the name is known: FEED_SOURCE, an entry of FEED_SOURCES_FILE (configForSource checks
 * it), or, with no sources file, a source with a stored cursor. Any other name is
 * refused with exit 2 and the near name: a typo would otherwise be a new source, and a
 * sync would store and publish the whole feed again under it.
 */
export async function knownSourceConfig(
  config: Config,
  logger: Logger,
  named: string | undefined,
): Promise<Config> {
  if (
    named === undefined &&
    config.sourcesFile !== null &&
    !config.sources.some((s) => s.source === config.feed.source)
  ) {
    throw new ConfigError(
      `FEED_SOURCE "${config.feed.source}" is not in FEED_SOURCES_FILE: pass --source to name one of its sources`,
    );
  }
  const own = configForSource(config, named ?? config.feed.source);
  if (named === undefined || config.sourcesFile !== null || named === config.feed.source) return own;
  const { storeFor } = await import('../compose/parts.js');
  const { storedSourcesNear } = await import('../store/cursor.js');
  const store = storeFor(config, logger);
  let found: Awaited<ReturnType<typeof storedSourcesNear>>;
  try {
    found = await storedSourcesNear(store, named);
  } catch (err) {
    // A schema not made yet (sync --migrate on a new one) holds no cursor.
    if ((err as { code?: unknown }).code !== UNDEFINED_TABLE) throw err;
    found = { stored: false, near: [] };
  } finally {
    await store.close();
  }
  const { stored, near } = found;
  if (stored) return own;
  const guess = nearest(named, [config.feed.source, ...near]);
  throw new ConfigError(
    `--source "${named}" is no known source: not FEED_SOURCE ("${config.feed.source}"), and no cursor is stored ` +
      `for it${guess === null ? '' : `; did you mean "${guess}"?`} To start a new source, set FEED_SOURCE ` +
      '(or list it in FEED_SOURCES_FILE)',
  );
}
