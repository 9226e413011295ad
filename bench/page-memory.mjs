// Peak RSS of a real `sync --once` against pages of 1, 4 and 8 MiB (the default
// FEED_MAX_RESPONSE_BYTES), next to the memory limit the Kubernetes manifests set:
// memory follows the bytes the catch-up holds (bounded), not the page count. Then
// 16 MiB pages with the response limit raised to take them, for what that costs, and
// small 100-event pages, whose rate the byte bound must leave alone.
// Run alone: `node bench/run.mjs --only page-memory`.
import { readFileSync } from 'node:fs';
import { prepareSchema, release } from './end-to-end.mjs';
import { benchPrefix } from './lib/env.mjs';
import { startPaddedFeed } from './lib/padded-feed.mjs';
import { mb, rate } from './lib/table.mjs';
import { runWorker, workerEnv } from './lib/worker.mjs';

const MiB = 1024 * 1024;
const LIMIT = 100;
/** feedsync's default FEED_MAX_RESPONSE_BYTES: the largest page a worker accepts. */
const MAX_RESPONSE = 8 * MiB;
const MANIFESTS = ['k8s/overlays/deployment/deployment.yaml', 'k8s/base/cronjob.yaml'];

/** The smallest container memory limit the manifests set, in MB (as RSS is reported). */
export function manifestMemoryLimitMb() {
  const limits = MANIFESTS.map((file) => {
    const text = readFileSync(new URL(`../${file}`, import.meta.url), 'utf8');
    const m = /limits:\s*\n(?:\s+\w+:.*\n)*?\s+memory:\s*(\d+)Mi/.exec(text);
    if (!m) throw new Error(`${file}: no memory limit found`);
    return Number(m[1]);
  });
  return (Math.min(...limits) * MiB) / 1e6;
}

async function oneRun(label, pages, pageBytes, extraEnv = {}) {
  // A type stored without a queue: the measure is the catch-up's, not Redis's.
  const feed = await startPaddedFeed({
    total: pages * LIMIT,
    eventBytes: Math.floor(pageBytes / LIMIT),
    limit: LIMIT,
    type: 'email.opened',
  });
  const env = {
    ...workerEnv({ schema: await prepareSchema(label), prefix: benchPrefix(label), baseUrl: feed.baseUrl }),
    ...extraEnv,
  };
  try {
    const run = await runWorker(env, { sampleMs: 25 });
    const s = run.summary;
    if (s?.status !== 'caught-up' || s.events_stored !== pages * LIMIT) {
      throw new Error(`${label}: the run did not store ${pages * LIMIT} events: ${JSON.stringify(s)}`);
    }
    return {
      pages,
      pageBytes,
      peakRssMb: run.peakRssMb,
      eventsPerSec: s.events_stored / (s.durationMs / 1000),
    };
  } finally {
    await feed.close();
    await release({ env });
  }
}

/** Runs the section: every size in MiB, then small pages. `scale` shrinks the runs (--quick). */
export async function pageMemory({ scale = 1, log = () => {} } = {}) {
  const runs = [];
  for (const size of [1, 4, 8, 16]) {
    // A size over the default limit runs with the limit raised to take it.
    const raised = size * MiB > MAX_RESPONSE;
    const limit = raised ? size * MiB : MAX_RESPONSE;
    // Below the response limit, with room for the envelope.
    const pageBytes = Math.min(size * MiB, limit - 64 * 1024);
    // Enough pages to fill what the catch-up may hold many times over (at least 8).
    const pages = Math.max(8, Math.round((96 / size) * scale));
    log(`sync --once, ${pages} pages of ${size} MiB`);
    const env = raised ? { FEED_MAX_RESPONSE_BYTES: String(limit) } : {};
    runs.push({ sizeMib: size, raised, ...(await oneRun(`pagemem${size}`, pages, pageBytes, env)) });
  }
  const smallPages = Math.max(20, Math.round(200 * scale));
  log(`sync --once, ${smallPages} pages of ${LIMIT} small events`);
  const small = await oneRun('pagemem_small', smallPages, 40_000);
  return { limitMb: manifestMemoryLimitMb(), runs, small };
}

/** Table rows (see lib/table.mjs). Only the default response limit is promised to fit. */
export function pageMemoryRows(r) {
  const rows = r.runs.map((run) => ({
    measure:
      `peak RSS, ${run.pages} pages of ${run.sizeMib} MiB (${LIMIT} events a page)` +
      (run.raised ? `, FEED_MAX_RESPONSE_BYTES raised to ${run.sizeMib} MiB` : ''),
    result: mb(run.peakRssMb),
    against: `manifests' limit ${mb(r.limitMb)}`,
    ratio: `${Math.round((run.peakRssMb / r.limitMb) * 100)}%`,
    target: run.raised ? '' : '< 100%',
    ok: run.raised ? null : run.peakRssMb < r.limitMb,
  }));
  rows.push({
    measure: `${r.small.pages} pages of ${LIMIT} small events (${Math.round(r.small.pageBytes / 1000)} kB)`,
    result: rate(r.small.eventsPerSec),
    against: `peak RSS ${mb(r.small.peakRssMb)}`,
  });
  return rows;
}
