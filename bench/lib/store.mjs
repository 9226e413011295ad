import { loadConfig } from '../../dist/config/config.js';
import { routeFor } from '../../dist/queue/routes.js';
import { backlogEvent } from '../../dist/simulator/backlog.js';
import { eventIdAt } from '../../dist/simulator/event-log.js';
import { createStore } from '../../dist/store/db.js';
import { migrate } from '../../dist/store/migrate.js';
import { benchSchema, DATABASE_URL } from './env.mjs';

/** feedsync's default queues and routing, from its own config defaults. */
export const defaultQueues = loadConfig({}).queues;
export const route = routeFor(defaultQueues);

/** A fresh schema of this run's, migrated; the caller closes the store. */
export async function migratedStore(label, opts = {}) {
  const store = createStore({ url: DATABASE_URL, schema: benchSchema(label), ...opts });
  await migrate(store);
  return store;
}

/** Backlog events `from`..`to` exactly as the simulator serves them (same ids, types, data). */
export function backlogEvents(from, to, startMs) {
  const events = [];
  for (let p = from; p <= to; p++) events.push(backlogEvent(p, eventIdAt(p), startMs));
  return events;
}
