import type pg from 'pg';
import type { ServiceEvent } from '../api/types.js';
import type { CursorMove } from './cursor-move.js';

/** What one run of the apply statement stores: a slice of the batch. */
export interface Part {
  events: readonly ServiceEvent[];
  repeats: readonly ServiceEvent[];
  cursor?: CursorMove | undefined;
  raws: readonly string[];
  reasons: readonly string[];
}

/** The statement's answer (see apply-statement.ts). */
export interface ApplyRow {
  ok: boolean;
  /** False when the writer's lease has another token now (another worker took the source). */
  held: boolean;
  /** The first page of another account's feed (foreign-feed.ts), which stored nothing; null when none. */
  alien_conflicts: number | null;
  alien_events: number | null;
  /** Ids of the part that were stored before it. */
  stored_before: string[];
  quarantined: number;
  conflicts: number;
  first_conflicts: number;
  /** New contact.* events without a usable data.email: stored and enqueued, projected nowhere. */
  contacts_without_email: number;
  /** The outbox rows the part added, in seq order: their seq (int8 as text) and event id. */
  outbox_seqs: string[];
  outbox_ids: string[];
}

/** Runs the apply statement for one part on the given client or pool. */
export type RunPart = (db: Pick<pg.ClientBase, 'query'>, part: Part) => Promise<ApplyRow>;

/**
 * Whether a Postgres error means "this data can never be stored", whatever the
 * retry: a data exception (class 22: a timestamp out of range, a NUL byte), a
 * program limit (class 54: an index row too large, a stack too deep) or an
 * integrity violation other than a unique or exclusion one (class 23: a check or
 * not-null). Connection failures, serialization failures (40), cancels and shut
 * downs (57) can pass on a retry, and stay errors of the run.
 */
function isUnstorable(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return false;
  if (code.startsWith('22') || code.startsWith('54')) return true;
  return code.startsWith('23') && code !== '23505' && code !== '23P01';
}

/**
 * Whether a batch that failed so is applied again in parts: data Postgres refuses
 * (isUnstorable), or a statement cancelled by `statement_timeout` (57014), which a
 * batch of the same events in smaller parts, each its own statement, may pass. Left
 * whole, a page too large to commit within the timeout would fail every run.
 */
export function isSplittable(err: unknown): boolean {
  return isUnstorable(err) || isStatementTimeout(err);
}

/**
 * A cancel by statement_timeout, not by anyone's request (pg_cancel_backend, a shutdown
 * of the session: the same 57014, "due to user request"), which a retry may pass.
 * Postgres's message is the only difference: in the server's lc_messages, English by default.
 */
function isStatementTimeout(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  return e?.code === '57014' && typeof e.message === 'string' && e.message.includes('statement timeout');
}

/** The quarantine reason for an event Postgres refused. */
export function refusal(err: unknown): string {
  const e = err as { code?: string; message?: string };
  const what = isStatementTimeout(err)
    ? 'the database could not store it within statement_timeout'
    : 'the database refused it';
  return `${what} (SQLSTATE ${e.code}): ${(e.message ?? '').slice(0, 300)}`;
}

export interface Isolated {
  /** The statement's answer; when not ok (lease or cursor lost), nothing was kept. */
  row: ApplyRow;
  /** Events Postgres refused, with the reason each was quarantined. */
  refused: { event: ServiceEvent; reason: string }[];
}

/**
 * The slow path, after the whole batch failed with an unstorable error or hit
 * statement_timeout: one transaction that moves the cursor and keeps the batch's
 * quarantine first, then stores the events in halves under savepoints, halving
 * again whatever fails so until single events remain; those are quarantined with
 * Postgres's reason. A single event that still times out alone is quarantined too:
 * every run would time out on it the same way and the source would never move (a wait
 * on another writer's lock is not a timeout here: lock_timeout ends it sooner, with
 * 55P03, an error of the run that the next one retries). statement_timeout bounds each
 * statement, not the transaction, so the parts commit together. Feed order is kept
 * (left halves first). At most 2n - 1 statements for n events, so it always ends;
 * any other error rolls everything back and is thrown.
 */
export async function applyIsolated(
  pool: pg.Pool,
  run: RunPart,
  part: Part,
  begin = 'BEGIN',
): Promise<Isolated> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query(begin);
    const head = await run(client, { ...part, events: [], repeats: [] });
    if (!head.ok) {
      await client.query('ROLLBACK');
      return { row: head, refused: [] };
    }
    const total: ApplyRow = { ...head, stored_before: [], outbox_seqs: [], outbox_ids: [] };
    const refused: Isolated['refused'] = [];
    const add = (row: ApplyRow): void => {
      total.stored_before.push(...row.stored_before);
      total.quarantined += row.quarantined;
      total.conflicts += row.conflicts;
      total.first_conflicts += row.first_conflicts;
      total.contacts_without_email += row.contacts_without_email;
      total.outbox_seqs.push(...row.outbox_seqs);
      total.outbox_ids.push(...row.outbox_ids);
    };
    // Repeats go with the first copy of their id, so a conflict finds the version it is compared with.
    const repeatsOf = groupRepeats(part.repeats);
    const pending: ServiceEvent[][] = part.events.length > 0 ? [[...part.events]] : [];
    while (pending.length > 0) {
      const events = pending.pop()!;
      const repeats = events.flatMap((e) => repeatsOf.get(e.id) ?? []);
      await client.query('SAVEPOINT feedsync_part');
      try {
        add(await run(client, { events, repeats, raws: [], reasons: [] }));
        await client.query('RELEASE SAVEPOINT feedsync_part');
      } catch (err) {
        if (!isSplittable(err)) throw err;
        await client.query('ROLLBACK TO SAVEPOINT feedsync_part');
        if (events.length === 1) {
          refused.push({ event: events[0]!, reason: refusal(err) });
        } else {
          const half = events.length >> 1;
          pending.push(events.slice(half), events.slice(0, half));
        }
      }
    }
    if (refused.length > 0) {
      add(
        await run(client, {
          events: [],
          repeats: [],
          raws: refused.map((r) => JSON.stringify(r.event)),
          reasons: refused.map((r) => r.reason),
        }),
      );
    }
    await client.query('COMMIT');
    return { row: total, refused };
  } catch (err) {
    broken = err instanceof Error ? err : new Error(String(err));
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    // A client that failed mid-transaction is not given back to the pool: it may be in any state.
    client.release(broken);
  }
}

function groupRepeats(repeats: readonly ServiceEvent[]): Map<string, ServiceEvent[]> {
  const map = new Map<string, ServiceEvent[]>();
  for (const r of repeats) map.set(r.id, [...(map.get(r.id) ?? []), r]);
  return map;
}
