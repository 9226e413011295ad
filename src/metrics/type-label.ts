import { KNOWN_EVENT_TYPES } from '../event-types.js';

/** The `type` label of every event type this release does not know. */
const OTHER_TYPE = 'other';

const KNOWN = new Set(KNOWN_EVENT_TYPES);

/**
 * The `type` label for an event type: the types of this release by name, every other
 * one as "other". The feed (or whoever can sign a webhook) chooses the type: as a
 * label it would make one series per distinct value, without bound, in memory and in
 * every scrape.
 */
export function typeLabel(type: string): string {
  return KNOWN.has(type) ? type : OTHER_TYPE;
}
