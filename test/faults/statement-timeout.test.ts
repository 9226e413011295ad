import { afterAll, expect, it } from 'vitest';
import { killChildren, runCli } from '../support/processes.js';
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
