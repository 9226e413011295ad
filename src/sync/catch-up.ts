import type { ServiceEvent } from '../api/types.js';
import type { FetchedPage, FetchPage } from '../feed/feed-client.js';
import { type ApplyBatch, type ApplyResult, nothingApplied } from '../store/applier.js';
import { type ForeignPage, foreignFeedError } from '../store/foreign-feed.js';
import { ByteBudget, type PageHold } from './byte-budget.js';
import { cursorEventOf } from './cursor-check.js';
import { type CursorCheck, cursorGuard } from './cursor-guard.js';
import { HELD_PAGES_DEFAULTS, HeldPages } from './held-pages.js';

/** The catch-up's own default; what it holds has HELD_PAGES_DEFAULTS. */
const CATCH_UP_DEFAULTS = Object.freeze({
  /**
   * Milliseconds, a quarter of a second: the wait for a full load while pages are coming.
   * A load of ten pages costs about half the database time per event of ten loads of
   * one; with this wait every commit of a catch-up was ten pages (docs/BENCHMARKS.md).
   */
  maxCommitDelayMs: 250,
});

export interface CatchUpOptions {
  source: string;
  /** The stored cursor the run starts from. */
  start: string | null;
  fetchPage: FetchPage;
  /** Waits for the account's request budget before each page, ahead of its share of the page memory (FeedReader.awaitBudget). */
  awaitBudget?: (signal: AbortSignal) => Promise<void>;
  apply: (batch: ApplyBatch) => Promise<ApplyResult>;
  /** Whether the source has stored this event: a next_after that names one points back. */
  isStored: (id: string) => Promise<boolean>;
  /** Aborted by SIGTERM: the request in flight is dropped, the batch in hand commits or rolls back. */
  signal: AbortSignal;
  /**
   * Aborted when the run has paged long enough (a once run's SYNC_ONCE_MAX_MS): the
   * request in flight is dropped, the pages fetched commit, and a feed not read to its
   * end comes back as 'limit-reached'.
   */
  limit?: AbortSignal;
  /** Pages fetched ahead of the commits. Default: HELD_PAGES_DEFAULTS.maxBuffered. */
  maxBuffered?: number;
  /** Pages joined into one transaction while catching up. Default: HELD_PAGES_DEFAULTS.maxPerCommit. */
  maxPagesPerCommit?: number;
  /** The capacity of the catch-up's own budget when it is given none. Default: HELD_PAGES_DEFAULTS.maxHeldBytes. */
  maxHeldBytes?: number;
  /** The largest answer the fetcher accepts (FEED_MAX_RESPONSE_BYTES), in bytes. Default: HELD_PAGES_DEFAULTS.maxPageBytes. */
  maxPageBytes?: number;
  /**
   * The process's budget of the feed's bytes, shared by its lanes: each answer takes
   * what it weighs as it is read, and its page keeps it until its commit ends.
   * Default: one of maxHeldBytes for this catch-up alone.
   */
  budget?: ByteBudget;
  /**
   * While more pages are coming, how long the oldest fetched page may wait for a full
   * load (maxPagesPerCommit) before it commits anyway, in ms. Default:
   * CATCH_UP_DEFAULTS.maxCommitDelayMs.
   */
  maxCommitDelayMs?: number;
  /** Called after every commit. */
  onCommit?: (info: CommitInfo) => void;
}

export interface CommitInfo {
  pages: number;
  result: ApplyResult;
  filteredOut: number;
  cursor: string | null;
}

export interface CatchUpResult {
  /**
   * 'lease-lost': another worker took the source; the batch in hand was not kept.
   * 'limit-reached': the limit came before the end of the feed; what was fetched is kept.
   */
  status: 'caught-up' | 'stopped' | 'cursor-conflict' | 'lease-lost' | 'limit-reached';
  cursor: string | null;
  pages: number;
  stored: number;
  duplicates: number;
  quarantined: number;
}

interface Fetched {
  page: FetchedPage;
  prev: string | null;
  /** performance.now() when the page arrived. */
  at: number;
  /** The page's response size. */
  bytes: number;
  /** What it holds of the budget until its commit ends. */
  hold: PageHold;
}

/**
 * Pages the feed from `start` until caught up. The fetch of the next page
 * overlaps the commit of the previous ones (next_after is known as soon as a
 * page arrives); pages fetched meanwhile are committed together, in feed order,
 * in one transaction with a compare-and-set of the cursor. A bad page stops the
 * fetching: the pages before it still commit, the cursor never passes it. A page of
 * another account's feed (store/foreign-feed.ts) throws FOREIGN_FEED, with nothing of
 * its commit stored.
 */
export async function catchUp(opts: CatchUpOptions): Promise<CatchUpResult> {
  const maxDelay = opts.maxCommitDelayMs ?? CATCH_UP_DEFAULTS.maxCommitDelayMs;
  const maxHeldBytes = opts.maxHeldBytes ?? HELD_PAGES_DEFAULTS.maxHeldBytes;
  const maxPageBytes = opts.maxPageBytes ?? HELD_PAGES_DEFAULTS.maxPageBytes;
  const held = new HeldPages<Fetched>({
    maxBuffered: opts.maxBuffered ?? HELD_PAGES_DEFAULTS.maxBuffered,
    maxPerCommit: opts.maxPagesPerCommit ?? HELD_PAGES_DEFAULTS.maxPerCommit,
    maxHeldBytes,
    maxPageBytes,
  });
  const budget = opts.budget ?? new ByteBudget(maxHeldBytes);
  const buffer = held.buffered;
  const handoff = new Handoff();
  // Our own controller, so a commit failure also stops the fetcher.
  const fetchAbort = new AbortController();
  const fetchSignal = AbortSignal.any([opts.signal, fetchAbort.signal, ...(opts.limit ? [opts.limit] : [])]);
  const fetched: FetchState = { done: false, error: null, reachedEnd: false };

  const result: CatchUpResult = {
    status: 'caught-up',
    cursor: opts.start,
    pages: 0,
    stored: 0,
    duplicates: 0,
    quarantined: 0,
  };
  let foreign: ForeignPage | undefined;
  const fetching = fetchAhead(opts, { held, budget, handoff, signal: fetchSignal }, fetched);
  try {
    while (true) {
      if (opts.signal.aborted) {
        result.status = 'stopped';
        break;
      }
      if (buffer.length === 0) {
        if (fetched.done) break;
        await handoff.morePages();
        continue;
      }
      // Catching up: give the fetcher a moment to fill a whole load (fewer, larger transactions),
      // unless it, or another lane's request, is waiting for room.
      if (!held.fullLoad() && !fetched.done && !handoff.fetcherWaiting && !budget.wanted) {
        const waited = performance.now() - buffer[0]!.at;
        if (waited < maxDelay) {
          await handoff.morePages(maxDelay - waited);
          continue;
        }
      }
      const done = await commitNext(opts, held, handoff);
      result.pages += done.pages;
      if (done.status === 'foreign-feed') {
        foreign = done.foreign;
        break;
      }
      if (done.status !== 'applied') {
        result.status = done.status;
        break;
      }
      result.cursor = done.cursor;
      result.stored += done.stored;
      result.duplicates += done.duplicates;
      result.quarantined += done.quarantined;
    }
  } finally {
    fetchAbort.abort();
    handoff.roomMade();
    await fetching;
    // Pages fetched and never committed (a stop, a failed commit) give their room back.
    for (const f of held.buffered) f.hold.release();
  }
  if (foreign) throw foreignFeedError(opts.source, foreign);
  if (fetched.error && result.status === 'caught-up') throw fetched.error;
  if (result.status === 'caught-up' && !fetched.reachedEnd && opts.limit?.aborted)
    result.status = 'limit-reached';
  return result;
}

/** How the fetcher ended: read by the committer once it is done. */
interface FetchState {
  done: boolean;
  /** What stopped it, unless its signal did. */
  error: unknown;
  /** Whether it read the feed's last page: a limit after it changes nothing. */
  reachedEnd: boolean;
}

/**
 * The hand-offs between the fetcher and the committer. One waker each: the committer
 * waits for pages, the fetcher for room (never both at once).
 */
class Handoff {
  private wakeCommitter: (() => void) | null = null;
  private wakeFetcher: (() => void) | null = null;

  /** Whether the fetcher is waiting for room. */
  get fetcherWaiting(): boolean {
    return this.wakeFetcher !== null;
  }

  pagesChanged(): void {
    this.wakeCommitter?.();
    this.wakeCommitter = null;
  }

  roomMade(): void {
    this.wakeFetcher?.();
    this.wakeFetcher = null;
  }

  /** Until pages change, or `timeoutMs` passes. */
  morePages(timeoutMs?: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = timeoutMs === undefined ? undefined : setTimeout(resolve, timeoutMs);
      this.wakeCommitter = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  room(): Promise<void> {
    return new Promise((resolve) => {
      this.wakeFetcher = resolve;
    });
  }
}

/**
 * Fetches pages ahead of the commits into `held`, each answer taking what it weighs of
 * the budget as it is read, until the feed's last page, an error or the signal.
 */
async function fetchAhead(
  opts: CatchUpOptions,
  into: {
    held: HeldPages<Fetched>;
    budget: ByteBudget;
    handoff: Handoff;
    signal: AbortSignal;
  },
  state: FetchState,
): Promise<void> {
  const { held, handoff, signal } = into;
  const checkCursor = cursorGuard(opts.start, opts.isStored);
  let after = opts.start;
  try {
    while (!signal.aborted) {
      // A lane waiting for its account's budget holds no page memory another lane needs.
      await opts.awaitBudget?.(signal);
      const page = await fetchNext(opts, into, after, checkCursor);
      if (page.last) {
        state.reachedEnd = true;
        break;
      }
      after = page.nextAfter;
      while (!held.roomForAnother() && !signal.aborted) await handoff.room();
    }
  } catch (err) {
    if (!signal.aborted) state.error = err;
  } finally {
    state.done = true;
    handoff.pagesChanged();
  }
}

/**
 * Fetches the page after `after` into `held`, its answer taking what it weighs of the
 * budget as it is read. Answers where the feed goes on, never the page: a frame that
 * waits for the next answer must not keep this one once its commit is done.
 */
async function fetchNext(
  opts: CatchUpOptions,
  into: { held: HeldPages<Fetched>; budget: ByteBudget; handoff: Handoff; signal: AbortSignal },
  after: string | null,
  checkCursor: CursorCheck,
): Promise<{ last: boolean; nextAfter: string | null }> {
  const hold = into.budget.open();
  let page: FetchedPage;
  try {
    page = await opts.fetchPage(after, into.signal, hold);
    await hold.read(page.bytes, into.signal);
    await checkCursor(page, after);
  } catch (err) {
    hold.release();
    throw err;
  }
  into.held.push({ page, prev: after, at: performance.now(), bytes: page.bytes, hold });
  into.handoff.pagesChanged();
  return { last: page.last, nextAfter: page.nextAfter };
}

/** What the committer keeps of a commit: counts and where the cursor is, never its pages. */
interface Committed {
  pages: number;
  status: ApplyResult['status'];
  foreign: ForeignPage | undefined;
  cursor: string | null;
  stored: number;
  duplicates: number;
  quarantined: number;
}

/**
 * Commits the next load and gives its room back (done or failed). Answers counts only,
 * so the committer, waiting for the next load, keeps nothing of this one: its pages
 * weigh in memory until their commit ends, and not after.
 */
async function commitNext(
  opts: CatchUpOptions,
  held: HeldPages<Fetched>,
  handoff: Handoff,
): Promise<Committed> {
  const taken = held.take();
  handoff.roomMade();
  let info: CommitInfo;
  try {
    info = await commit(opts, taken);
  } finally {
    held.committed(taken);
    for (const f of taken) f.hold.release();
    handoff.roomMade();
  }
  const { result } = info;
  if (result.status === 'applied') opts.onCommit?.(info);
  return {
    pages: taken.length,
    status: result.status,
    foreign: result.foreign,
    cursor: info.cursor,
    stored: result.inserted.length,
    duplicates: result.duplicates,
    quarantined: result.quarantined,
  };
}

async function commit(opts: CatchUpOptions, taken: Fetched[]): Promise<CommitInfo> {
  const first = taken[0]!;
  const last = taken[taken.length - 1]!;
  const events: ServiceEvent[] = [];
  const pageStarts: number[] = [];
  const quarantine: { raw: string; reason: string }[] = [];
  let filteredOut = 0;
  for (const { page } of taken) {
    pageStarts.push(events.length);
    events.push(...page.events);
    quarantine.push(...page.quarantine);
    filteredOut += page.filteredOut;
  }
  const next = last.page.nextAfter;
  const batch: ApplyBatch = { source: opts.source, receivedVia: 'feed', events, quarantine, pageStarts };
  if (next !== null && next !== first.prev) {
    batch.cursor = { prev: first.prev, next, check: cursorEventOf(events, first.prev, next) };
  }
  if (events.length === 0 && quarantine.length === 0 && !batch.cursor) {
    return {
      pages: taken.length,
      filteredOut,
      cursor: first.prev,
      result: nothingApplied(),
    };
  }
  const result = await opts.apply(batch);
  return { pages: taken.length, result, filteredOut, cursor: batch.cursor ? next : first.prev };
}
