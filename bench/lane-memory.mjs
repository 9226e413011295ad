// Peak RSS of a real `sync --once` of 1, 4 and 8 sources at once (SYNC_CONCURRENCY
// lanes) against pages near FEED_MAX_RESPONSE_BYTES (8 MiB: 95 events of about 86 KB),
// with plain `node` (Node's defaults), with the image's node flags and, where this
// machine can make one, inside a memory cgroup of the manifests' limit, as in a pod: the
// lanes share one budget of the feed's bytes, so memory follows the process, not the
// number of lanes.
// Run alone: `node bench/run.mjs --only lane-memory`.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { prepareSchema, release } from './end-to-end.mjs';
import { benchPrefix, IMAGE_NODE_FLAGS } from './lib/env.mjs';
import { createMemoryCgroup } from './lib/memory-cgroup.mjs';
import { startPaddedFeed } from './lib/padded-feed.mjs';
import { mb } from './lib/table.mjs';
import { runWorker, workerEnv } from './lib/worker.mjs';
import { manifestMemoryLimitMb } from './page-memory.mjs';

/** Events a page (FEED_PAGE_LIMIT) and their size: pages of 8.2 MB, below the default response limit (8 MiB). */
const LIMIT = 95;
const EVENT_BYTES = 86_000;
/** How each run starts node: Node's defaults, the image's flags, Node's defaults in a cgroup of the manifests' limit. */
const MODES = {
  plain: { nodeArgs: [], says: 'plain node' },
  image: { nodeArgs: IMAGE_NODE_FLAGS, says: "the image's node flags" },
  cgroup: { nodeArgs: [], says: "Node's defaults in a memory cgroup of the manifests' limit" },
};

async function oneRun(lanes, pages, mode) {
  const inCgroup = mode === 'cgroup';
  const label = `lanemem${lanes}${mode}`;
  const feed = await startPaddedFeed({
    total: pages * LIMIT,
    eventBytes: EVENT_BYTES,
    limit: LIMIT,
    type: 'email.opened',
  });
  const dir = mkdtempSync(join(tmpdir(), 'feedsync-lanes-'));
  const env = {
    ...workerEnv({ schema: await prepareSchema(label), prefix: benchPrefix(label), baseUrl: feed.baseUrl }),
    SYNC_CONCURRENCY: String(lanes),
    FEED_PAGE_LIMIT: String(LIMIT),
    LANE_KEY: 'key',
    FEED_SOURCES_FILE: join(dir, 'sources.json'),
  };
  // Every source reads the same feed under a cursor of its own: each lane pages all of it.
  const sources = Array.from({ length: lanes }, (_, i) => ({ source: `lane-${i}`, api_key_env: 'LANE_KEY' }));
  writeFileSync(env.FEED_SOURCES_FILE, JSON.stringify({ sources }));
  const cgroup = inCgroup ? createMemoryCgroup(manifestMemoryLimitMb() * 1e6) : null;
  if (inCgroup && !cgroup) return null;
  try {
    const run = await runWorker(env, {
      nodeArgs: MODES[mode].nodeArgs,
      sampleMs: 25,
      anyExit: true,
      ...(cgroup ? { cgroup } : {}),
    });
    const stored = run.summary?.events_stored ?? 0;
    return {
      lanes,
      pages,
      peakRssMb: run.peakRssMb,
      code: run.code,
      complete: run.code === 0 && stored === lanes * pages * LIMIT,
      oomKills: cgroup ? cgroup.oomKills() : 0,
    };
  } finally {
    await cgroup?.dispose();
    rmSync(dir, { recursive: true, force: true });
    await feed.close();
    await release({ env });
  }
}

/** Runs the section. `scale` shrinks the runs (--quick). */
export async function laneMemory({ scale = 1, log = () => {} } = {}) {
  const pages = Math.max(4, Math.round(8 * scale));
  const runs = [];
  for (const lanes of [1, 4, 8]) {
    for (const mode of Object.keys(MODES)) {
      log(`sync --once, ${lanes} lanes of ${pages} pages of 8.2 MB, ${MODES[mode].says}`);
      const run = await oneRun(lanes, pages, mode);
      if (run) runs.push({ ...run, mode });
    }
  }
  return { limitMb: manifestMemoryLimitMb(), runs };
}

/** Table rows (see lib/table.mjs). */
export function laneMemoryRows(r) {
  return r.runs.map((run) => ({
    measure:
      `peak RSS, ${run.lanes} lane${run.lanes > 1 ? 's' : ''} (SYNC_CONCURRENCY), each ${run.pages} pages of 8.2 MB, ` +
      MODES[run.mode].says,
    result: mb(run.peakRssMb),
    against: `manifests' limit ${mb(r.limitMb)}${run.complete ? '' : `; exit ${run.code}, ${run.oomKills} OOM kills`}`,
    ratio: `${Math.round((run.peakRssMb / r.limitMb) * 100)}%`,
    target: '< 100%',
    ok: run.complete && run.peakRssMb < r.limitMb,
  }));
}
