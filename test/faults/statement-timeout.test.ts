import { afterAll, expect, it } from 'vitest';
import { killChildren, runCli, waitFor } from '../support/processes.js';
import { fateOf } from './support/fate.js';
import { feedEvents, startFeedServer } from './support/feed-server.js';
import { measured } from './support/results.js';
import { useSandboxes } from './support/sandbox.js';

const sandbox = useSandboxes();
afterAll(async () => {
  await killChildren();
});

const COUNT = 3_000;
const TIMEOUT_MS = 800;

it('26. a page that cannot commit within statement_timeout is committed in parts', async () => {
  await measured(
    {
      item: 26,
      title: 'a page longer than statement_timeout',
      claim:
        'A page whose statement `statement_timeout` cancels (SQLSTATE 57014) is committed in smaller parts in one ' +
        'transaction, cursor and all: the run stores every event once and exits 0, and the source is never blocked.',
      method:
        `A feed server of ${COUNT.toLocaleString('en-US')} events, \`FEED_PAGE_LIMIT=1000\`, \`DATABASE_URL\` with ` +
        `\`options=-c statement_timeout=${TIMEOUT_MS}\`, and a trigger on events that sleeps 2 ms per stored row ` +
        '(a page of 1,000 takes 2 s, one of 250 half a second); `feedsync sync --once`.',
    },
    async (rec) => {
      rec.injectedWhat = 'pages past statement_timeout';
      const served = feedEvents(COUNT);
      const feed = await startFeedServer(served);
      const box = await sandbox('stmt_timeout');
      const s = `"${box.schema}"`;
      await box.store.pool.query(`
        CREATE FUNCTION ${s}.slow() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_sleep(0.002 * (SELECT count(*) FROM added)); RETURN NULL; END $$;
        CREATE TRIGGER slow AFTER INSERT ON ${s}.events REFERENCING NEW TABLE AS added
          FOR EACH STATEMENT EXECUTE FUNCTION ${s}.slow();`);
      const url = new URL(box.databaseUrl);
      url.searchParams.set('options', `-c statement_timeout=${TIMEOUT_MS}`);
      const env = box.env(feed.baseUrl, { DATABASE_URL: url.toString(), FEED_PAGE_LIMIT: '1000' });
      try {
        const started = performance.now();
        const run = await runCli(['sync', '--once'], env, 180_000);
        const runMs = Math.round(performance.now() - started);
        rec.injected = COUNT / 1000;
        const fate = await fateOf(box, served);
        rec.checked = fate.served;
        rec.lost = fate.lost;
        rec.duplicated = fate.duplicated;
        rec.figures = [
          ['exit code of the run', run.code ?? 'signal'],
          ['events stored / jobs', `${fate.stored} / ${fate.jobs}`],
          ['run time', `${runMs} ms`],
        ];
        expect(run.code, run.stderr).toBe(0);
        expect(fate).toMatchObject({ lost: 0, duplicated: 0, stored: COUNT, jobs: COUNT });
      } finally {
        await feed.close();
      }
    },
  );
});

const SLOW_COUNT = 400;
const SLOW_ID = 'ev_00150';
const DEADLINE_MS = 1_000;
const SLEEP_S = 4;

it('46. an event that can never apply within the deadline is cancelled by Postgres, quarantined, and nothing commits late', async () => {
  await measured(
    {
      item: 46,
      title: 'an event slower to apply than the statement deadline',
      claim:
        'Postgres itself enforces DATABASE_STATEMENT_TIMEOUT_MS on the apply statement (`SET LOCAL statement_timeout`, ' +
        'the one-statement path included): the statement is cancelled and rolled back, nothing runs on after the ' +
        'run and nothing commits after it ended, the page is bisected, the one event that can never apply in time ' +
        'is quarantined with the reason, and every other event is stored once.',
      method:
        `A feed server of ${SLOW_COUNT} events (\`FEED_PAGE_LIMIT=100\`), a row trigger on events that sleeps ` +
        `${SLEEP_S} s for one of them, \`DATABASE_STATEMENT_TIMEOUT_MS=${DEADLINE_MS}\`; \`feedsync sync --once\`, ` +
        'then pg_stat_activity and the store watched until the sleeping statement would have ended.',
    },
    async (rec) => {
      rec.injectedWhat = 'events slower than the deadline';
      const served = feedEvents(SLOW_COUNT);
      const feed = await startFeedServer(served);
      const box = await sandbox('slow_event');
      const s = `"${box.schema}"`;
      await box.store.pool.query(`
        CREATE FUNCTION ${s}.slow_one() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.id = '${SLOW_ID}' THEN PERFORM pg_sleep(${SLEEP_S}); END IF; RETURN NEW; END $$;
        CREATE TRIGGER slow_one BEFORE INSERT ON ${s}.events FOR EACH ROW EXECUTE FUNCTION ${s}.slow_one();`);
      const env = box.env(feed.baseUrl, {
        FEED_PAGE_LIMIT: '100',
        DATABASE_STATEMENT_TIMEOUT_MS: String(DEADLINE_MS),
        SOURCE_LEASE_MS: '3000',
      });
      const stored = async (): Promise<number> =>
        Number((await box.store.pool.query(`SELECT count(*) AS n FROM ${s}.events`)).rows[0].n);
      const running = async (): Promise<number> =>
        Number(
          (
            await box.store.pool.query(
              `SELECT count(*) AS n FROM pg_stat_activity
                WHERE state <> 'idle' AND pid <> pg_backend_pid() AND query LIKE '%' || $1 || '%'`,
              [box.schema],
            )
          ).rows[0].n,
        );
      try {
        const started = performance.now();
        const run = await runCli(['sync', '--once'], env, 180_000);
        const runMs = Math.round(performance.now() - started);
        const atExit = await stored();
        const runningAtExit = await running();
        // Whatever the client gave up on would have ended by now, and committed if it could.
        await new Promise((r) => setTimeout(r, (SLEEP_S + 1) * 1000));
        const later = await stored();
        await waitFor(async () => (await running()) === 0, { timeoutMs: 30_000, what: 'no statement left' });
        const { rows: quarantined } = await box.store.pool.query<{ raw: string; reason: string }>(
          `SELECT raw, reason FROM ${s}.quarantine`,
        );
        rec.injected = 1;
        const fate = await fateOf(
          box,
          served.filter((e) => e.id !== SLOW_ID),
        );
        rec.checked = fate.served;
        rec.lost = fate.lost;
        rec.duplicated = fate.duplicated;
        rec.figures = [
          ['exit code of the run / run time', `${run.code ?? 'signal'} / ${runMs} ms`],
          ['statements of the schema still running when it exited', runningAtExit],
          ['events stored at exit / after the sleep would have ended', `${atExit} / ${later}`],
          ['quarantined', quarantined.length],
          ['events stored / jobs', `${fate.stored} / ${fate.jobs}`],
        ];
        expect(run.code, run.stderr).toBe(0);
        expect(runningAtExit).toBe(0);
        expect(later).toBe(atExit);
        expect(quarantined).toHaveLength(1);
        expect(quarantined[0]!.raw).toContain(SLOW_ID);
        expect(quarantined[0]!.reason).toContain('statement_timeout');
        expect(fate).toMatchObject({ lost: 0, duplicated: 0, stored: SLOW_COUNT - 1, jobs: SLOW_COUNT - 1 });
      } finally {
        await feed.close();
      }
    },
  );
});
