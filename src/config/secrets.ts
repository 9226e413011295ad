import { ConfigError } from '../errors.js';
import type { Config, Env } from './config-type.js';
import { urlSecrets } from './connection-url.js';

/** Variables whose value may come from a file named by `<NAME>_FILE` (a mounted secret). */
export const FILE_VARIANTS = [
  'FEED_API_KEY',
  'WEBHOOK_SECRET',
  'DATABASE_URL',
  'REDIS_URL',
  'QUEUE_DATABASE_URL',
] as const;

/**
 * Fills `raw` (the variables as read, by name) from the `<NAME>_FILE` of each variable of
 * `names` that may have one: the file's text, trimmed. Setting both is refused; an
 * unreadable file is named by its path, never by its content.
 */
export function readFileVariants(
  names: readonly string[],
  raw: Env,
  env: Env,
  readFile: (p: string) => string,
): void {
  for (const name of FILE_VARIANTS.filter((n) => names.includes(n))) {
    const file = env[`${name}_FILE`];
    if (!file) continue;
    if (raw[name] !== undefined)
      throw new ConfigError(`${name}: set either ${name} or ${name}_FILE, not both`);
    try {
      raw[name] = readFile(file).trim();
    } catch (err) {
      throw new ConfigError(
        `${name}_FILE: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
  }
}

/** Every secret value in the config, for the logger to scrub from its output. */
export function secretsOf(config: Config): string[] {
  const secrets = [...config.webhooks.secrets];
  if (config.feed.apiKey) secrets.push(config.feed.apiKey);
  for (const s of config.sources) if (s.apiKey) secrets.push(s.apiKey);
  secrets.push(
    ...urlSecrets(config.database.url),
    ...urlSecrets(config.queues.databaseUrl),
    ...urlSecrets(config.redis.url),
  );
  if (config.tracing) secrets.push(...urlSecrets(config.tracing.url));
  for (const p of [config.redis.password, config.redis.sentinel?.password]) {
    if (p) secrets.push(p, encodeURIComponent(p));
  }
  return secrets.filter((s) => s.length >= 4);
}
