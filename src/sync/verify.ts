import type { FetchPage } from '../feed/feed-client.js';
import { type ApplyBatch, type ApplyResult, nothingApplied } from '../store/applier.js';
import { getCursor, isStored } from '../store/cursor.js';
import type { Store } from '../store/db.js';
import { compareWithStore, oldestKeptEvent, recordVerifyRun } from '../store/verify-store.js';
import { type CatchUpOptions, catchUp } from './catch-up.js';

/** How many ids of each class a result names: enough to start looking, bounded whatever the feed. */
export const VERIFY_FIRST_IDS = 10;

export interface VerifyOptions {
  /** Read after this event id; undefined: after the oldest event still kept (the feed's start without a retention). */
  from?: string;
  /** Store and hand over what is missing, once, as reconcile does; a differing body is never overwritten. */
  repair: boolean;
  signal: AbortSignal;
}

/** One class of findings: how many, and the first ids (VERIFY_FIRST_IDS at most). */
export interface Found {
  count: number;
  first: string[];
}

export interface VerifyResult {
  source: string;
  /** 'verified': read up to the cursor; 'stopped': by SIGTERM, nothing recorded; 'nothing-synced': no cursor to verify up to. */
  status: 'verified' | 'stopped' | 'nothing-synced';
  /** Where it read after (null: the feed's start), and up to. */
  from: string | null;
  cursor: string | null;
  pages: number;
  /** Events read from the feed and compared. */
  checked: number;
  /** Served, not stored, not pruned by the retention. */
  missing: Found;
  /** Stored under the feed's id with other content; never overwritten. */
  differing: Found;
  /** Served, not stored, before the oldest event still kept under EVENTS_RETENTION_DAYS: pruned, not missing. */
  pruned: number;
  /** Of the missing, those stored and handed over by --repair. */
  repaired: number;
  /** Nothing missing or differing was found (the exit code is 0). */
  ok: boolean;
}

/** What verify needs of its source: its store and settings, and reconcile's way of storing. */
export interface VerifyDeps {
  source: string;
  store: Store;
  eventsRetentionDays: number | null;
  /** The catch-up settings reconcile pages with (budget, page bytes, the relay offered each commit). */
  catchUp: Pick<CatchUpOptions, 'isStored' | 'maxPageBytes' | 'budget' | 'onCommit'>;
  /** Reconcile's store of a batch: never moves the cursor, enqueues only what was new. */
  storeMissing: (batch: ApplyBatch) => Promise<ApplyResult>;
  /** Refuses a --from the feed does not know (reconcile's check), before anything is read. */
  checkFrom: (from: string, signal: AbortSignal) => Promise<void>;
  /** Hands over the jobs of what was stored (reconcile's drain). */
  drain: () => Promise<void>;
}

/**
 * Re-reads the feed from `from` up to the source's cursor, page by page (memory is the
 * catch-up's: pages held, never the feed), and compares each page with the store.
 * Repairs through reconcile's own store of a batch. A run read to the cursor is kept as
 * the source's last verify, for `status`.
 */
export async function verifySource(
  deps: VerifyDeps,
  fetchPage: FetchPage,
  opts: VerifyOptions,
): Promise<VerifyResult> {
  const { store, source } = deps;
  const end = (await getCursor(store, source))?.afterId ?? null;
  const kept = await keptFrom(deps);
  const from = opts.from ?? kept.id;
  const result = emptyResult(source, from, end);
  if (end === null || from === end)
    return { ...result, status: end === null ? 'nothing-synced' : 'verified' };
  if (opts.from !== undefined) await deps.checkFrom(opts.from, opts.signal);
  // Read from a point the retention has pruned past: what comes before the oldest kept event is pruned territory.
  const pruning = new PrunedTerritory(
    kept,
    opts.from === undefined || (await isStored(store, source, opts.from)),
  );

  const missing = new Tally();
  const differing = new Tally();
  const read = await catchUp({
    ...deps.catchUp,
    source,
    start: from,
    fetchPage: upTo(fetchPage, end),
    signal: opts.signal,
    apply: async ({ cursor: _never, ...batch }) => {
      const found = await compareWithStore(store, source, batch.events);
      const lost = found.missing.filter(pruning.notPruned(batch.events));
      result.checked += batch.events.length;
      result.pruned += found.missing.length - lost.length;
      missing.add(lost.map((e) => e.id));
      differing.add(found.differing);
      const matched = batch.events.length - found.missing.length;
      if (!opts.repair || lost.length === 0) return { ...nothingApplied(), duplicates: matched };
      // Only the missing, as their own batch: the page bounds (pageStarts) were the whole batch's.
      const stored = await deps.storeMissing({
        source,
        receivedVia: 'feed',
        events: lost,
        quarantine: batch.quarantine,
      });
      result.repaired += stored.inserted.length;
      return { ...stored, duplicates: stored.duplicates + matched };
    },
  });
  if (opts.repair) await deps.drain();
  const done: VerifyResult = {
    ...result,
    status: read.status === 'stopped' ? 'stopped' : 'verified',
    pages: read.pages,
    missing: missing.found(),
    differing: differing.found(),
    ok: missing.count === 0 && differing.count === 0,
  };
  if (done.status === 'verified') {
    await recordVerifyRun(store, {
      source,
      finishedAt: new Date(),
      missing: done.missing.count,
      differing: done.differing.count,
      repaired: done.repaired,
      checked: done.checked,
      ok: done.ok,
    });
  }
  return done;
}

/**
 * Where the kept events begin. Without a retention every event is kept: the feed's
 * start. With one, the oldest event still stored (by arrival, as the retention prunes):
 * the default start, since from the feed's start every pruned event would be read for
 * nothing.
 */
async function keptFrom(deps: VerifyDeps): Promise<{ retention: boolean; id: string | null }> {
  if (deps.eventsRetentionDays === null) return { retention: false, id: null };
  return { retention: true, id: await oldestKeptEvent(deps.store, deps.source) };
}

/**
 * Which events the retention may have pruned: under a retention, those the feed serves
 * before the oldest event still kept (the retention prunes by arrival, and the feed's
 * events arrive in its order). A read that starts at a stored event starts past them.
 */
class PrunedTerritory {
  private inside: boolean;

  constructor(
    private readonly kept: { retention: boolean; id: string | null },
    startsAtKept: boolean,
  ) {
    this.inside = kept.retention && !startsAtKept;
  }

  /** A filter of a batch's missing events: those not in pruned territory. Call once per batch, in feed order. */
  notPruned(batch: readonly { id: string }[]): (event: { id: string }) => boolean {
    if (!this.inside) return () => true;
    const at = this.kept.id === null ? -1 : batch.findIndex((e) => e.id === this.kept.id);
    // No event kept at all: everything read may have been pruned.
    if (at < 0) return () => false;
    this.inside = false;
    const before = new Set(batch.slice(0, at).map((e) => e.id));
    return (event) => !before.has(event.id);
  }
}

/**
 * The feed as it stood at the cursor: the page that holds the cursor's event (or whose
 * next_after it is) ends it, its events past the cursor left out. What comes after was
 * not synced yet: none of it is missing.
 */
function upTo(fetchPage: FetchPage, end: string): FetchPage {
  return async (after, signal) => {
    const page = await fetchPage(after, signal);
    const at = page.events.findIndex((e) => e.id === end);
    if (at >= 0) return { ...page, events: page.events.slice(0, at + 1), nextAfter: end, last: true };
    return page.nextAfter === end ? { ...page, last: true } : page;
  };
}

function emptyResult(source: string, from: string | null, cursor: string | null): VerifyResult {
  const none = { count: 0, first: [] };
  return {
    source,
    status: 'verified',
    from,
    cursor,
    pages: 0,
    checked: 0,
    missing: none,
    differing: none,
    pruned: 0,
    repaired: 0,
    ok: true,
  };
}

/** A count and the first few ids counted. */
class Tally {
  count = 0;
  private readonly first: string[] = [];

  add(ids: readonly string[]): void {
    this.count += ids.length;
    for (const id of ids) if (this.first.length < VERIFY_FIRST_IDS) this.first.push(id);
  }

  found(): Found {
    return { count: this.count, first: [...this.first] };
  }
}
