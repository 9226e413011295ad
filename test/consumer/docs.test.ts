import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Queue } from 'bullmq';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { CONSUMER_DEFAULTS } from '../../src/consumer/defaults.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { runNode, spawnNode, waitFor } from '../support/processes.js';
import { deletePrefix, TEST_REDIS_URL, uniquePrefix } from '../support/redis.js';
import { startOtlpReceiver } from '../tracing/otlp-receiver.js';

// The code of docs/CONSUMER.md marked `<!-- tested as NAME -->`, compiled under the
// project's tsconfig against feedsync/consumer (as an application's own files are) and run.

const DOC = readFileSync(new URL('../../docs/CONSUMER.md', import.meta.url), 'utf8');
const DIR = new URL(`./.docs-snippets-${process.pid}/`, import.meta.url).pathname;
const appSchema = uniqueSchema('consumer_docs');
const prefix = uniquePrefix('consumer_docs');
const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 2 });
const queue = new Queue('email-events', { connection: { url: TEST_REDIS_URL }, prefix });

/** A consumer of the application's, for the tracing file to be loaded in front of: not from the doc. */
const TRACED_CONSUMER = `import { createConsumer } from 'feedsync/consumer';
import pg from 'pg';

const pool = new pg.Pool({ connectionString: process.env.APP_DATABASE_URL });
const consumer = createConsumer({
  name: 'traced',
  pool,
  schema: process.env.APP_SCHEMA ?? 'public',
  handlers: { 'email.sent': async () => {} },
});
await consumer.migrate();
process.once('SIGTERM', () => void consumer.close());
console.log('consuming');
await consumer.run();
await pool.end();
`;

afterAll(async () => {
  rmSync(DIR, { recursive: true, force: true });
  await queue.close();
  await pool.end();
  await dropSchema(appSchema);
  await deletePrefix(prefix);
});

function snippets(): Map<string, string> {
  const found = new Map<string, string>();
  for (const m of DOC.matchAll(/<!-- tested as (\S+) -->\n```ts\n([\s\S]*?)```/g)) found.set(m[1]!, m[2]!);
  return found;
}

const env = {
  APP_DATABASE_URL: TEST_DATABASE_URL,
  APP_SCHEMA: appSchema,
  REDIS_URL: TEST_REDIS_URL,
  QUEUE_PREFIX: prefix,
};

const sent = (id: string) => ({
  source: 'default',
  id,
  type: 'email.sent',
  created_at: '2026-01-01T00:00:00.000Z',
  data: { email_id: `em_${id}`, to: [] },
});

describe('docs/CONSUMER.md', () => {
  it("states the consumer's defaults as CONSUMER_DEFAULTS holds them", () => {
    const stated = (option: string): string | undefined =>
      new RegExp(`^\\| \`${option}\` \\| ([^|]+) \\|`, 'm').exec(DOC)?.[1]?.trim();
    for (const option of [
      'concurrency',
      'handlerTimeoutMs',
      'lockTimeoutMs',
      'connectTimeoutMs',
      'closeTimeoutMs',
    ] as const) {
      expect(stated(option), option).toBe(String(CONSUMER_DEFAULTS[option]));
    }
    expect(stated('schema')).toBe(`\`${CONSUMER_DEFAULTS.schema}\``);
    expect(stated('retentionHours')).toBe(
      `max(${CONSUMER_DEFAULTS.minRetentionHours}, \`OUTBOX_RETENTION_HOURS\`)`,
    );
  });

  it('compiles its tested files and runs withInbox in a Worker of its own, once per event', async () => {
    const files = snippets();
    expect([...files.keys()].sort()).toEqual(['consumer.ts', 'tracing.ts', 'with-inbox.ts']);
    mkdirSync(DIR, { recursive: true });
    for (const [name, code] of files) writeFileSync(`${DIR}${name}`, code);
    writeFileSync(`${DIR}traced-consumer.ts`, TRACED_CONSUMER);
    writeFileSync(
      `${DIR}tsconfig.json`,
      JSON.stringify({
        extends: '../../../tsconfig.json',
        compilerOptions: {
          rootDir: '.',
          outDir: 'dist',
          noEmit: false,
          declaration: false,
          sourceMap: false,
        },
        include: ['*.ts'],
        // The project's own exclude names this folder: not inherited here.
        exclude: [],
      }),
    );
    const tsc = await runNode(
      ['node_modules/typescript/bin/tsc', '-p', DIR],
      { PATH: process.env.PATH ?? '' },
      90_000,
    );
    expect(tsc.code, tsc.stdout + tsc.stderr).toBe(0);

    const worker = spawnNode([`${DIR}dist/with-inbox.js`], env);
    try {
      await queue.add('email.sent', sent('e1'), { jobId: 'default/e1' });
      // The same event again under another job id: the inbox knows it.
      await queue.add('email.sent', sent('e1'), { jobId: 'default/e1-again' });
      await waitFor(() => worker.stdout().includes('default/e1-again seen before'), {
        timeoutMs: 20_000,
        what: 'both jobs handled',
      });
    } finally {
      worker.signal('SIGTERM');
      const exit = await worker.waitExit(20_000);
      expect(exit.code, exit.stderr).toBe(0);
    }
    expect(worker.stdout().trim().split('\n')).toEqual([
      'default/e1 applied',
      'default/e1-again seen before',
    ]);
    const { rows } = await pool.query(`SELECT consumer, source, event_id FROM "${appSchema}".feedsync_inbox`);
    expect(rows).toEqual([{ consumer: 'billing', source: 'default', event_id: 'e1' }]);
  }, 150_000);

  it('its first consumer, with APP_DATABASE_URL unset, says so in one line and exits 2', async () => {
    const run = await runNode([`${DIR}dist/consumer.js`], { PATH: process.env.PATH ?? '' }, 20_000);
    expect(run.code).toBe(2);
    expect(run.stderr.trim().split('\n')).toEqual([
      'APP_DATABASE_URL: set it to your database, e.g. postgres://app@127.0.0.1:5432/app',
    ]);
  });

  it("runs the tracing file in front of a consumer: its jobs' spans reach the collector", async () => {
    const receiver = await startOtlpReceiver();
    const consumer = spawnNode(['--import', `${DIR}dist/tracing.js`, `${DIR}dist/traced-consumer.js`], {
      ...env,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    });
    try {
      await waitFor(() => consumer.stdout().includes('consuming'), {
        timeoutMs: 20_000,
        what: 'the consumer',
      });
      await queue.add('email.sent', sent('t1'), { jobId: 'default/t1' });
      await waitFor(async () => (await queue.getJob('default/t1'))?.isCompleted(), { what: 'the job' });
    } finally {
      consumer.signal('SIGTERM');
      const exit = await consumer.waitExit(20_000).finally(() => receiver.close());
      expect(exit.code, exit.stderr).toBe(0);
    }
    expect(receiver.spans.filter((s) => s.name === 'handle job')).toEqual([
      expect.objectContaining({
        service: 'billing',
        attributes: expect.objectContaining({ 'feedsync.consumer': 'traced', 'feedsync.job.applied': true }),
      }),
    ]);
  }, 60_000);
});
