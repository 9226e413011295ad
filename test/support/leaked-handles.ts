import { afterAll, beforeAll } from 'vitest';

// A setup file (vitest.config.ts): each test file must leave behind no socket, server,
// child process or timer it opened, as graphile-worker checks its pools after each
// test. A handle left open keeps a worker's process alive, and in production it is a
// pool nobody closes. Each file runs in its own process, so what is open when the
// file starts is vitest's own: its pipes to the main process, and now and then a
// timer that batches its reports, gone within a few milliseconds of the last test.

/** Requests in flight (a write, a lookup, a close) and immediates end by themselves. */
const TRANSIENT = /(Req|ReqWrap|Callback|Promise)$|^Immediate$/;

/** How long a handle being closed (a socket's FIN, a child's exit) may take to go. */
const SETTLE_MS = 5_000;

function counts(): Map<string, number> {
  const byType = new Map<string, number>();
  for (const type of process.getActiveResourcesInfo()) {
    if (!TRANSIENT.test(type)) byType.set(type, (byType.get(type) ?? 0) + 1);
  }
  return byType;
}

function extra(now: Map<string, number>, before: Map<string, number>): string[] {
  return [...now]
    .filter(([type, n]) => n > (before.get(type) ?? 0))
    .map(([type, n]) => `${n - (before.get(type) ?? 0)} ${type}`);
}

/**
 * Where the open handles lead, to find the code that opened them: sockets by their
 * ends, servers by address, children by pid (timers are no handle objects). Node's only list of handle objects
 * is the undocumented _getActiveHandles; it serves the message only, never the check.
 */
function describeHandles(): string[] {
  const handles = (process as unknown as { _getActiveHandles?: () => unknown[] })._getActiveHandles?.() ?? [];
  return handles.flatMap((h): string[] => {
    const o = h as Record<string, unknown> & { constructor: { name: string } };
    const name = o.constructor.name;
    if (typeof o.remotePort === 'number')
      return [`${name} ${o.localPort} → ${o.remoteAddress}:${o.remotePort}`];
    if (typeof o.address === 'function' && typeof o.listening === 'boolean') {
      const address = (o.address as () => unknown).call(h);
      return [`${name} listening on ${JSON.stringify(address)}`];
    }
    if (typeof o.pid === 'number' && typeof o.spawnfile === 'string')
      return [`${name} pid ${o.pid} (${o.spawnfile})`];
    return [];
  });
}

let before = new Map<string, number>();

/** Taken before any test can install fake timers, which would never fire here. */
const realSetTimeout = setTimeout;

// The first beforeAll of the file. Vitest's own timer comes and goes, so no timer is
// taken as the file's start: every one must be gone by the end.
beforeAll(() => {
  before = counts();
  before.delete('Timeout');
});

// Registered first, so run last of the file's afterAll hooks.
afterAll(async () => {
  const deadline = Date.now() + SETTLE_MS;
  let left = extra(counts(), before);
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => realSetTimeout(resolve, 50));
    left = extra(counts(), before);
  }
  if (left.length > 0) {
    throw new Error(
      `this file left open: ${left.join(', ')} (after ${SETTLE_MS} ms); close them in its afterAll` +
        `\n  ${describeHandles().join('\n  ')}`,
    );
  }
});
