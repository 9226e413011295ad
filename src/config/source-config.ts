import { nearest } from '../edit-distance.js';
import { ConfigError } from '../errors.js';
import type { Config } from './config-type.js';
import { deepFreeze } from './deep-freeze.js';
import { sourceNameProblem } from './sources-file.js';

/**
 * The config with `source` as its only source (`sync --source`): a source of
 * FEED_SOURCES_FILE, or without the file any name, read as FEED_SOURCE would be.
 * A name not in the file is refused (exit 2).
 */
export function onlySource(config: Config, source: string): Config {
  const own = configForSource(config, source);
  const entry = config.sources.find((s) => s.source === source);
  const { baseUrl, apiKey, types } = own.feed;
  return deepFreeze({
    ...own,
    sources: [
      {
        source,
        baseUrl,
        apiKey,
        keyProblem: entry?.keyProblem ?? null,
        types,
        ...(entry?.budget ? { budget: entry.budget } : {}),
      },
    ],
  });
}

/** The base URL and key, for the commands that talk to the service. */
export function requireService(config: Config): { baseUrl: string; apiKey: string } {
  if (config.feed.baseUrl === null) throw new ConfigError('FEED_BASE_URL: required for this command');
  if (config.feed.apiKey === null)
    throw new ConfigError('FEED_API_KEY: required for this command (or FEED_API_KEY_FILE)');
  return { baseUrl: config.feed.baseUrl, apiKey: config.feed.apiKey };
}

/**
 * The config as the one-source run of `source` sees it: `feed` carries that source's
 * base URL, key and types. With FEED_SOURCES_FILE, a name not in the file is refused;
 * without it, any name reads with FEED_BASE_URL / FEED_API_KEY / FEED_TYPES, as before.
 */
export function configForSource(config: Config, source: string): Config {
  const problem = sourceNameProblem(source);
  if (problem) throw new ConfigError(`source ${JSON.stringify(source)}: ${problem}`);
  const entry = config.sources.find((s) => s.source === source);
  if (!entry && config.sourcesFile !== null) {
    const names = config.sources.map((s) => s.source);
    const guess = nearest(source, names);
    throw new ConfigError(
      `source "${source}" is not in FEED_SOURCES_FILE (${names.slice(0, 10).join(', ')}` +
        `${names.length > 10 ? `, and ${names.length - 10} more` : ''})` +
        `${guess === null ? '' : `; did you mean "${guess}"?`}; give --source one of them`,
    );
  }
  const own = entry
    ? {
        baseUrl: entry.baseUrl,
        apiKey: entry.apiKey,
        types: entry.types,
        ...(entry.budget?.share === undefined ? {} : { rateShare: entry.budget.share }),
        ...(entry.budget?.maxPerSecond === undefined
          ? {}
          : { maxRequestsPerSecond: entry.budget.maxPerSecond }),
      }
    : {};
  return deepFreeze({ ...config, feed: { ...config.feed, ...own, source } });
}
