import type { ServiceEvent } from '../../src/api/types.js';
import { createStore, type EventRoute, migrate, type Store } from '../../src/store/index.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';

/** A store on a fresh, migrated schema of its own; `dispose` closes it and drops the schema. */
export async function migratedStore(label: string): Promise<{ store: Store; dispose: () => Promise<void> }> {
  const schema = uniqueSchema(label);
  const store = createStore({ url: TEST_DATABASE_URL, schema });
  await migrate(store);
  return {
    store,
    dispose: async () => {
      await store.close();
      await dropSchema(schema);
    },
  };
}

/** The contract's routing: email.* and contact.* to their queues, anything else stored only. */
export function route(type: string): EventRoute | null {
  if (/^email\.(sent|delivered|bounced|complained|failed)$/.test(type)) {
    return { queue: 'email-events', jobName: type };
  }
  if (type === 'contact.subscribed' || type === 'contact.unsubscribed') {
    return { queue: 'contact-events', jobName: type };
  }
  return null;
}

export function event(
  id: string,
  type: string,
  createdAt: string,
  data: Record<string, unknown> = {},
): ServiceEvent {
  return { id, type, created_at: createdAt, data };
}
