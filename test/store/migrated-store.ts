import fc from 'fast-check';
import type { ServiceEvent } from '../../src/api/types.js';
import type { EventRoute } from '../../src/store/applier.js';
import { createStore, type Store } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
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

/**
 * Up to `maxEvents` events with unique ids made from `spec`, and one order of their
 * arrival: shuffled, cut into batches of 1 to 4, some events sent again (feed overlap,
 * webhook and feed both). For the property tests of the projections.
 */
export function arrivals<S>(
  spec: fc.Arbitrary<S>,
  make: (id: string, s: S, i: number) => ServiceEvent,
  maxEvents: number,
): fc.Arbitrary<{ events: ServiceEvent[]; batches: ServiceEvent[][] }> {
  return fc
    .uniqueArray(fc.stringMatching(/^[a-z0-9]{1,3}$/), { minLength: 1, maxLength: maxEvents })
    .chain((ids) =>
      fc.record({
        events: fc.tuple(...ids.map(() => spec)).map((specs) => specs.map((s, i) => make(ids[i]!, s, i))),
        order: fc.shuffledSubarray(
          ids.map((_, i) => i),
          { minLength: ids.length, maxLength: ids.length },
        ),
        chunkSizes: fc.array(fc.integer({ min: 1, max: 4 }), { maxLength: maxEvents }),
        resent: fc.array(fc.nat({ max: ids.length - 1 }), { maxLength: 3 }),
      }),
    )
    .map(({ events, order, chunkSizes, resent }) => {
      const shuffled = order.map((i) => events[i]!);
      const batches: ServiceEvent[][] = [];
      let next = 0;
      for (const size of chunkSizes) {
        if (next >= shuffled.length) break;
        batches.push(shuffled.slice(next, next + size));
        next += size;
      }
      if (next < shuffled.length) batches.push(shuffled.slice(next));
      for (const [k, i] of resent.entries()) batches[k % batches.length]!.push(events[i]!);
      return { events, batches };
    });
}
