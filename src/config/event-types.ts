import { editDistance } from '../edit-distance.js';
import { KNOWN_EVENT_TYPES } from '../event-types.js';

/** Marks a type the service added after this release: `+email.opened`. */
export const NEW_TYPE_MARK = '+';

const TYPE_NAME = /^[a-z]+(\.[a-z_]+)+$/;

/**
 * Checks a type filter (FEED_TYPES, a source's `types`): full names, each one a
 * type of this release or marked with a leading `+` as one the service added
 * since. Returns the names, unique and sorted, without marks; null for an empty
 * list (every type). Throws an Error whose message quotes the bad entry and the
 * closest known type: a typo would otherwise filter out every event, silently.
 */
export function parseEventTypes(entries: readonly string[]): string[] | null {
  const types = new Set<string>();
  for (const entry of entries.map((e) => e.trim()).filter(Boolean)) {
    const marked = entry.startsWith(NEW_TYPE_MARK);
    const name = marked ? entry.slice(NEW_TYPE_MARK.length) : entry;
    if (!TYPE_NAME.test(name)) {
      const full = KNOWN_EVENT_TYPES.find((t) => t.endsWith(`.${name}`));
      throw new Error(
        `"${entry}" is not a full type name such as email.delivered${full ? `; did you mean ${full}?` : ''}`,
      );
    }
    if (!marked && !KNOWN_EVENT_TYPES.includes(name)) {
      throw new Error(
        `"${name}" is not an event type of this release; did you mean ${closestType(name)}? ` +
          `(for a type the service added since, write it as ${NEW_TYPE_MARK}${name})`,
      );
    }
    types.add(name);
  }
  return types.size === 0 ? null : [...types].sort();
}

/** The known type nearest to `name` by edit distance (ties: the first in order). */
function closestType(name: string): string {
  let best = KNOWN_EVENT_TYPES[0]!;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const known of KNOWN_EVENT_TYPES) {
    const d = editDistance(name, known);
    if (d < bestDistance) [best, bestDistance] = [known, d];
  }
  return best;
}
