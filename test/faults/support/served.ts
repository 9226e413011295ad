import type { ServiceEvent } from '../../../src/api/types.js';

/** An event as the feed served it: enough to know whether it gets a job. */
export interface Served {
  id: string;
  type: string;
}

/**
 * Every event the simulator's feed holds, read afresh by a clean client (pages of
 * 1000, no faults expected): the ground truth the stored set is compared with.
 */
export async function readWholeFeed(baseUrl: string, apiKey: string): Promise<Served[]> {
  const served: Served[] = [];
  let after: string | null = null;
  // Bounded by the feed's size: each page moves `after` forward or ends the loop.
  for (let page = 0; page < 1_000_000; page++) {
    const url = new URL(`${baseUrl}/events`);
    url.searchParams.set('limit', '1000');
    if (after) url.searchParams.set('after', after);
    const res = await fetch(url, { headers: { authorization: `Bearer ${apiKey}` } });
    if (!res.ok) throw new Error(`reading the whole feed: HTTP ${res.status}`);
    const body = (await res.json()) as { data: ServiceEvent[]; next_after: string | null };
    for (const e of body.data) served.push({ id: e.id, type: e.type });
    if (body.data.length < 1000) return served;
    after = body.next_after;
  }
  throw new Error('the feed did not end');
}

/** Ids of events that get a BullMQ job (DESIGN: the five email.* and two contact.* types). */
export function routed(served: readonly Served[]): Served[] {
  return served.filter((e) =>
    /^(email\.(sent|delivered|bounced|complained|failed)|contact\.(subscribed|unsubscribed))$/.test(e.type),
  );
}
