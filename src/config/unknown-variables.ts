import { editDistance } from '../edit-distance.js';

/**
 * A warning for each variable of the environment that looks like one of feedsync's own
 * but is not one it reads (`QUEUE_PREFX`, `DATABSE_SCHEMA`): such a typo is otherwise
 * ignored, and the default it leaves in place can act on the wrong schema or queues.
 * A name is of feedsync's families when its first word is the first word of a known
 * variable (FEED, QUEUE, REDIS…), or one letter off it for words of five letters or more;
 * outside them (`JOBS_ATTEMPTS`), when the whole name is a letter off a known one (two for
 * names of twelve letters or more): few names are that close to one of ours by chance.
 * `inUse` holds values read through other names (a sources file's `api_key_env`): a
 * variable carrying one of them is read, whatever its name.
 */
export function unknownVariables(
  env: Record<string, string | undefined>,
  known: readonly string[],
  inUse: readonly string[] = [],
): string[] {
  const knownSet = new Set(known);
  const families = [...new Set(known.filter((n) => n.includes('_')).map((n) => n.split('_')[0]!))];
  const ofFamily = (word: string): boolean =>
    families.some((f) => f === word || (f.length >= 5 && editDistance(f, word) <= 1));
  const warnings: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (knownSet.has(name) || value === undefined || !name.includes('_')) continue;
    const near = closest(name, known);
    const nearMiss = near !== null && editDistance(name, near) <= (name.length >= 12 ? 2 : 1);
    if (!(ofFamily(name.split('_')[0]!) || nearMiss) || inUse.includes(value)) continue;
    warnings.push(
      `${name} is not a variable feedsync reads, so it is ignored` +
        (near ? `; did you mean ${near}?` : ' (docs/DEPLOYMENT.md lists them, under Configuration)'),
    );
  }
  return warnings.sort();
}

/** The warnings given so far: each is given once per process, however often the config is loaded. */
const given = new Set<string>();

/**
 * Gives each of `warnings` through `write` unless it was given before in this process.
 * Default `write`: a process warning (code FEEDSYNC_UNKNOWN_VARIABLE), which Node prints
 * on stderr once and an application can take with `process.on('warning')`.
 */
export function warnOnce(
  warnings: readonly string[],
  write: (warning: string) => void = (w) => process.emitWarning(w, { code: 'FEEDSYNC_UNKNOWN_VARIABLE' }),
): void {
  for (const warning of warnings) {
    if (given.has(warning)) continue;
    given.add(warning);
    write(warning);
  }
}

/** The known name nearest to `name`, when it is near enough to be what was meant. */
function closest(name: string, known: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = Math.max(2, Math.floor(name.length / 4)) + 1;
  for (const candidate of known) {
    const d = editDistance(name, candidate);
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return best;
}
