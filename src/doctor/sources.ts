import type { Config } from '../config/config-type.js';
import { configForSource } from '../config/source-config.js';
import { mapBounded } from './bounded.js';
import { feedCheck } from './feed-check.js';
import { type Check, check } from './report.js';

/** Key checks at once: a file of many sources must not open a connection per source at once. */
export const SOURCE_CONCURRENCY = 8;

/** One source doctor looks at: its feed and key, and its cursor. */
export interface SourceUnderCheck {
  /** The config as that source's run sees it (configForSource). */
  config: Config;
  /** Why its key could not be read (a key file missing or empty), or null. */
  keyProblem: string | null;
  /** Appended to the check names: empty for the one source of FEED_*, ` <source>` for each of a file. */
  suffix: string;
}

/**
 * What doctor checks: every source of FEED_SOURCES_FILE (or only `only`), else the one
 * source of FEED_* (FEED_SOURCE, or `only`). A name not in the file throws a ConfigError.
 */
export function sourcesUnderCheck(config: Config, only?: string): SourceUnderCheck[] {
  if (config.sourcesFile === null) {
    return [{ config: configForSource(config, only ?? config.feed.source), keyProblem: null, suffix: '' }];
  }
  const names = only === undefined ? config.sources.map((s) => s.source) : [only];
  return names.map((name) => ({
    config: configForSource(config, name),
    keyProblem: config.sources.find((s) => s.source === name)?.keyProblem ?? null,
    suffix: ` ${name}`,
  }));
}

/** Each source's key against its feed, SOURCE_CONCURRENCY at once; what is left at `deadline` is skipped. */
export function sourceFeedChecks(
  targets: readonly SourceUnderCheck[],
  timeoutMs: number,
  deadline: number,
): Promise<Check[]> {
  return mapBounded(
    targets,
    SOURCE_CONCURRENCY,
    deadline,
    (t) => {
      const name = `feed${t.suffix}`;
      if (t.keyProblem !== null) {
        return Promise.resolve(
          check(
            name,
            'fail',
            `source "${t.config.feed.source}": ${t.keyProblem}; every sync of it fails`,
            `mount or fill the key file of source "${t.config.feed.source}" (api_key_file in FEED_SOURCES_FILE)`,
          ),
        );
      }
      const keyHint =
        t.suffix === ''
          ? 'FEED_API_KEY (or FEED_API_KEY_FILE)'
          : `the key of source "${t.config.feed.source}" (its api_key_file or api_key_env in FEED_SOURCES_FILE, else FEED_API_KEY)`;
      return feedCheck(t.config, timeoutMs, { name, keyHint });
    },
    (t) => outOfTime(`feed${t.suffix}`),
  );
}

/** The line of a source not reached within doctor's time budget. */
export function outOfTime(name: string): Check {
  return check(
    name,
    'skip',
    "not checked: doctor's time budget ran out before this source",
    'run "feedsync doctor --source <name>" for it, or a longer --timeout-ms',
  );
}

/**
 * Why `source` cannot be checked (a name not in FEED_SOURCES_FILE, or not a name at
 * all), or null. A configuration that does not load is null here: doctor reports it.
 */
export function unknownSource(load: () => Config, source: string): string | null {
  let config: Config;
  try {
    config = load();
  } catch {
    return null;
  }
  try {
    sourcesUnderCheck(config, source);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}
