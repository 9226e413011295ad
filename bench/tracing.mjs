import { createServer } from 'node:http';
import pg from 'pg';
import { median, syncOnce } from './end-to-end.mjs';
import { DATABASE_URL } from './lib/env.mjs';
import { redisPid } from './lib/machine.mjs';
import { startSimChild } from './lib/simulator.mjs';
import { pct } from './lib/table.mjs';

/** Rounds of each kind, alternating; medians are reported (a shared machine is noisy). */
const ROUNDS = 3;

/**
 * A collector's OTLP/HTTP receiver reduced to what the exporter needs: it reads each
 * JSON export, counts its spans and answers 200.
 */
async function startSink() {
  let spans = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (d) => {
      body += d;
    });
    req.on('end', () => {
      spans += (body.match(/"spanId"/g) ?? []).length;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${server.address().port}`,
    spans: () => spans,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/**
 * What tracing costs a `sync --once` run, in worker CPU per event: off (no OTEL_*
 * variable: the API's no-op), on (OTLP/HTTP exporter, every trace sampled) and, given
 * `before` (another build's dist/bin/feedsync.js, e.g. the build without tracing), that
 * build. Kinds alternate within each round, so all see the same machine.
 */
export async function tracingCost({ events, before, log }) {
  const sim = await startSimChild();
  const sink = await startSink();
  const monitor = new pg.Client({ connectionString: DATABASE_URL });
  await monitor.connect();
  const cpu = { pg: monitor, redisPid: await redisPid(), simPid: sim.pid };
  const kinds = {
    ...(before ? { before: { cli: before, extra: {} } } : {}),
    off: { extra: {} },
    on: {
      extra: {
        OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint,
        OTEL_TRACES_SAMPLER: 'always_on',
        OTEL_SERVICE_NAME: 'feedsync-bench',
      },
    },
  };
  const runs = Object.fromEntries(Object.keys(kinds).map((k) => [k, []]));
  let spansOn = 0;
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const [kind, { cli, extra }] of Object.entries(kinds)) {
        log(`tracing cost: ${kind}, ${events} events (round ${round + 1} of ${ROUNDS})`);
        const spans0 = sink.spans();
        const r = await syncOnce(sim, {
          label: `tracing_${kind}_${round}`,
          events,
          cpu,
          env: extra,
          ...(cli ? { cli } : {}),
        });
        if (kind === 'on') spansOn += sink.spans() - spans0;
        runs[kind].push({
          workerUs: (r.cpu.worker * 1000) / events,
          totalUs: ((r.cpu.worker + r.cpu.postgres + r.cpu.redis + r.cpu.simulator) * 1000) / events,
          eventsPerSec: r.eventsPerSec,
        });
      }
    }
  } finally {
    await monitor.end();
    await sink.close();
    await sim.stop();
  }
  if (spansOn === 0) throw new Error('tracing cost: the runs with tracing on exported no span');
  const summary = Object.fromEntries(
    Object.entries(runs).map(([k, list]) => [
      k,
      {
        workerUs: median(list.map((x) => x.workerUs)),
        totalUs: median(list.map((x) => x.totalUs)),
        eventsPerSec: median(list.map((x) => x.eventsPerSec)),
        rounds: list.map((x) => x.workerUs),
      },
    ]),
  );
  return { events, rounds: ROUNDS, spansPerRun: spansOn / ROUNDS, ...summary };
}

/** The section alone: 20,000 events a run at scale 1. `--before PATH` adds another build. */
export function tracingAlone({ scale, log, before }) {
  return tracingCost({ events: Math.round(20_000 * scale), before, log });
}

const us = (x) => `${x.toFixed(1)} µs`;

export function tracingRows(r) {
  const rows = [];
  if (r.before) {
    rows.push({
      measure: `worker CPU per event, the build before (${r.events.toLocaleString('en-US')} events a run, median of ${r.rounds})`,
      result: us(r.before.workerUs),
    });
  }
  rows.push(
    {
      measure: r.before
        ? '  tracing off (no OTEL_* variable)'
        : `worker CPU per event, tracing off (${r.events} events a run, median of ${r.rounds})`,
      result: us(r.off.workerUs),
      ...(r.before ? { against: 'the build before', ratio: pct(r.off.workerUs / r.before.workerUs) } : {}),
    },
    {
      measure: `  tracing on, OTLP/HTTP, sampled at 100% (${Math.round(r.spansPerRun)} spans a run)`,
      result: us(r.on.workerUs),
      against: 'tracing off',
      ratio: pct(r.on.workerUs / r.off.workerUs),
    },
    {
      measure: 'CPU per event, all processes (worker, Postgres, Redis, simulator): off / on',
      result: `${us(r.off.totalUs)} / ${us(r.on.totalUs)}`,
      against: 'off',
      ratio: pct(r.on.totalUs / r.off.totalUs),
    },
    {
      measure: '  every round, worker µs per event',
      result: Object.keys(r)
        .filter((k) => ['before', 'off', 'on'].includes(k))
        .map((k) => `${k} ${r[k].rounds.map((x) => x.toFixed(0)).join('/')}`)
        .join(', '),
    },
  );
  return rows;
}
