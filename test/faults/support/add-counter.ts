import { Redis } from 'ioredis';
import { QUEUES } from './fate.js';

/** How often BullMQ reported each job added, and how many re-adds it ignored. */
export interface AddCounts {
  added: Map<string, number>;
  /** Re-adds of a job id that was still kept: BullMQ's de-duplication at work. */
  ignored: number;
}

/**
 * Follows the BullMQ event streams of a prefix (`added`, `duplicated`) while a test
 * runs. BullMQ trims them to about 10000 entries, so they are read as they grow;
 * `stop` reads what is left and returns the counts.
 */
export function followAdds(redisUrl: string, prefix: string): { stop(): Promise<AddCounts> } {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  redis.on('error', () => {});
  const keys = QUEUES.map((q) => `${prefix}:${q}:events`);
  const last = keys.map(() => '0');
  const counts: AddCounts = { added: new Map(), ignored: 0 };
  let stopping = false;

  const take = (reply: [string, [string, string[]][]][] | null): number => {
    let n = 0;
    for (const [key, entries] of reply ?? []) {
      const i = keys.indexOf(key);
      for (const [id, fields] of entries) {
        last[i] = id;
        n++;
        const field = (name: string) => fields[fields.indexOf(name) + 1];
        const event = field('event');
        const jobId = field('jobId');
        if (!jobId) continue;
        if (event === 'added') counts.added.set(jobId, (counts.added.get(jobId) ?? 0) + 1);
        else if (event === 'duplicated') counts.ignored++;
      }
    }
    return n;
  };
  const read = async (block: boolean): Promise<number> => {
    const args = block ? ['BLOCK', '100'] : [];
    const reply = (await redis.call('XREAD', 'COUNT', '5000', ...args, 'STREAMS', ...keys, ...last)) as
      | [string, [string, string[]][]][]
      | null;
    return take(reply);
  };
  const loop = (async () => {
    while (!stopping) await read(true);
  })();

  return {
    async stop() {
      stopping = true;
      await loop;
      // Drain what came after the last blocking read; bounded by what the streams hold.
      for (let i = 0; i < 1000 && (await read(false)) > 0; i++);
      redis.disconnect();
      return counts;
    },
  };
}
