import { Redis } from 'ioredis';
import pg from 'pg';
import { QUEUES } from './fate.js';
import type { QueueHome } from './sandbox-queues.js';

/** How often BullMQ reported each job added, and how many re-adds it ignored. */
export interface AddCounts {
  added: Map<string, number>;
  /** Re-adds of a job id that was still kept: BullMQ's de-duplication at work. */
  ignored: number;
}

/** Counts the jobs added to a sandbox's queues while a test runs; `stop` returns the counts. */
export interface AddFollower {
  stop(): Promise<AddCounts>;
}

/**
 * Follows the adds of a sandbox's queues, on either backend: in Redis BullMQ's event
 * streams, in Postgres every row offered to BullMQ's job table.
 */
export function followAdds(box: QueueHome): Promise<AddFollower> {
  return box.queueUrl
    ? followJobInserts(box.queueUrl, box.prefix)
    : Promise.resolve(followStreams(box.redisUrl, box.prefix));
}

/**
 * Follows the BullMQ event streams of a prefix (`added`, `duplicated`) while a test
 * runs. BullMQ trims them to about 10000 entries, so they are read as they grow;
 * `stop` reads what is left and returns the counts.
 */
function followStreams(redisUrl: string, prefix: string): AddFollower {
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

/**
 * Counts the rows offered to the job table of a Postgres queues' schema: BullMQ adds
 * with INSERT ... ON CONFLICT DO NOTHING, so a BEFORE INSERT trigger sees every add and
 * re-add, an AFTER INSERT one only the jobs stored. (BullMQ's own event table is trimmed
 * like a stream, and its bulk add announces no `duplicated`.) `stop` drops the triggers.
 */
async function followJobInserts(url: string, schema: string): Promise<AddFollower> {
  const s = `"${schema}"`;
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  await client.query(`
    CREATE TABLE ${s}.faults_job_inserts (id text NOT NULL, stored boolean NOT NULL);
    CREATE FUNCTION ${s}.faults_note_insert() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO ${s}.faults_job_inserts VALUES (NEW.id, TG_WHEN = 'AFTER'); RETURN NEW; END $$;
    CREATE TRIGGER faults_offered BEFORE INSERT ON ${s}.job
      FOR EACH ROW EXECUTE FUNCTION ${s}.faults_note_insert();
    CREATE TRIGGER faults_stored AFTER INSERT ON ${s}.job
      FOR EACH ROW EXECUTE FUNCTION ${s}.faults_note_insert();`);
  return {
    async stop() {
      try {
        const { rows } = await client.query<{ id: string; stored: number; offered: number }>(
          `SELECT id, count(*) FILTER (WHERE stored)::int AS stored, count(*) FILTER (WHERE NOT stored)::int AS offered
             FROM ${s}.faults_job_inserts GROUP BY id`,
        );
        const counts: AddCounts = { added: new Map(), ignored: 0 };
        for (const r of rows) {
          if (r.stored > 0) counts.added.set(r.id, r.stored);
          counts.ignored += r.offered - r.stored;
        }
        await client.query(`
          DROP TRIGGER faults_offered ON ${s}.job;
          DROP TRIGGER faults_stored ON ${s}.job;
          DROP FUNCTION ${s}.faults_note_insert();
          DROP TABLE ${s}.faults_job_inserts;`);
        return counts;
      } finally {
        await client.end();
      }
    },
  };
}
