// A catch-up under a request budget shared with the application's own sends: the
// simulator states a budget of 5 requests a second (--rate-limit 5), the bench sends
// twice a second through POST /emails with the same key, and `sync --once` catches up
// 100,000 events with FEED_RATE_SHARE at its default of 0.5 (2.5 requests a second).
// Pages of 1,000 events (FEED_PAGE_LIMIT) keep the run to about 40 s: at the default 100
// it would be 400 s of the same pace. `node bench/run.mjs --only budget` (after `npm run build`).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { API_KEY, benchPrefix, benchSchema, CLI, DATABASE_URL, REDIS_URL } from './lib/env.mjs';
import { startSimChild } from './lib/simulator.mjs';
import { pct } from './lib/table.mjs';

const LIMIT = 5;
const SHARE = 0.5;
const SENDS_PER_SECOND = 2;
const PAGE_LIMIT = 1_000;
const EMAIL = {
  from: 'app@example.test',
  to: ['delivered@example.test'],
  subject: 'bench',
  html: '<p>bench</p>',
};

async function run(args, env) {
  const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c) => {
    stderr += c;
  });
  const [code] = await once(child, 'exit');
  if (code !== 0) throw new Error(`feedsync ${args.join(' ')} exited ${code}: ${stderr.slice(0, 2000)}`);
}

/** The application: POST /emails `perSecond` with the bench's key until stopped. */
function sends(baseUrl) {
  const tally = { sent: 0, refused: 0, failed: 0 };
  const pending = new Set();
  const timer = setInterval(() => {
    const p = fetch(`${baseUrl}/emails`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify(EMAIL),
    })
      .then(async (res) => {
        await res.arrayBuffer();
        if (res.status === 200) tally.sent++;
        else if (res.status === 429) tally.refused++;
        else tally.failed++;
      })
      .catch(() => {
        tally.failed++;
      })
      .finally(() => pending.delete(p));
    pending.add(p);
  }, 1000 / SENDS_PER_SECOND);
  return {
    tally,
    async stop() {
      clearInterval(timer);
      await Promise.all([...pending]);
      return tally;
    },
  };
}

/** When the feed's answered requests first and last grew, from /_sim/stats every 50 ms. */
function watchFeed(origin) {
  const seen = { first: null, last: null, answered: 0 };
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const stats = await (await fetch(`${origin}/_sim/stats`)).json();
      const byStatus = stats.requests['GET /api/events'] ?? {};
      const answered = Object.values(byStatus).reduce((a, b) => a + b, 0);
      if (answered > seen.answered) {
        seen.first ??= performance.now();
        seen.last = performance.now();
        seen.answered = answered;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return seen;
    },
  };
}

export async function budgetAlone({ scale, log }) {
  const events = Math.round(100_000 * scale);
  log(`budget: ${events} events under a stated budget of ${LIMIT}/s, sends at ${SENDS_PER_SECOND}/s`);
  const sim = await startSimChild({ rateLimit: LIMIT });
  try {
    await sim.setBacklog(events);
    const env = {
      PATH: process.env.PATH ?? '',
      DATABASE_URL,
      DATABASE_SCHEMA: benchSchema('budget'),
      REDIS_URL,
      QUEUE_PREFIX: benchPrefix('budget'),
      FEED_BASE_URL: sim.baseUrl,
      FEED_API_KEY: API_KEY,
      FEED_PAGE_LIMIT: String(PAGE_LIMIT),
      LOG_LEVEL: 'warn',
      METRICS_PORT: '0',
    };
    await run(['migrate'], env);
    const app = sends(sim.baseUrl);
    const feed = watchFeed(sim.origin);
    const started = performance.now();
    await run(['sync', '--once'], env);
    const seconds = (performance.now() - started) / 1000;
    const seen = await feed.stop();
    const sent = await app.stop();
    const stats = await (await fetch(`${sim.origin}/_sim/stats`)).json();
    const pages = stats.requests['GET /api/events'] ?? {};
    const requests = Object.values(pages).reduce((a, b) => a + b, 0);
    const rate = (requests - 1) / ((seen.last - seen.first) / 1000);
    return {
      events,
      seconds,
      requests,
      rate,
      ofShare: rate / (LIMIT * SHARE),
      feed429: pages['429'] ?? 0,
      sent,
    };
  } finally {
    await sim.stop();
  }
}

export function budgetRows(r) {
  const n = (x) => x.toLocaleString('en-US');
  return [
    {
      measure: `sync --once, ${n(r.events)} events (${PAGE_LIMIT} a page), budget ${LIMIT}/s, FEED_RATE_SHARE ${SHARE}`,
      result: `${r.rate.toFixed(2)} req/s`,
      against: `share ${LIMIT * SHARE} req/s; ${r.requests} requests in ${r.seconds.toFixed(1)} s`,
      ratio: pct(r.ofShare),
      target: '≥ 90% and ≤ 100%',
      ok: r.ofShare >= 0.9 && r.ofShare <= 1.02,
    },
    {
      measure: `the application's sends beside it, ${SENDS_PER_SECOND}/s with the same key`,
      result: `${r.sent.refused} refused`,
      against: `${r.sent.sent} sent, ${r.sent.failed} failed otherwise`,
      target: '0 refused',
      ok: r.sent.refused === 0 && r.sent.failed === 0,
    },
    { measure: "feedsync's own requests answered 429", result: String(r.feed429) },
  ];
}
