import { createHash } from 'node:crypto';
import type { ServiceEvent } from '../api/types.js';
import { applyStatement } from './apply-statement.js';
import { quoteSchema, type Store } from './db.js';

/** Where the outbox sends an event type; null from the router means "store only". */
export interface EventRoute {
  queue: string;
  jobName: string;
}

/** One page (or a few) to store in one transaction. */
export interface ApplyBatch {
  source: string;
  receivedVia: 'feed' | 'webhook';
  /** Checked envelopes in feed order; the same id may appear twice (the first stands). */
  events: readonly ServiceEvent[];
  /** Items that failed the envelope checks, kept raw. */
  quarantine: readonly { raw: string; reason: string }[];
  /** Compare-and-set of the cursor (feed only): `prev` must still be stored for `next` to land. */
  cursor?: { prev: string | null; next: string };
}

export interface ApplyResult {
  /** 'cursor-conflict': another worker moved the cursor first; nothing of the batch was kept. */
  status: 'applied' | 'cursor-conflict';
  /** The events stored by this batch, in feed order. */
  inserted: ServiceEvent[];
  /** Events already stored, or repeated within the batch. */
  duplicates: number;
  /** Quarantine rows this batch added (a raw text already there is not counted). */
  quarantined: number;
  /** Outbox rows this batch added. */
  outboxRows: number;
}

export interface Applier {
  apply(batch: ApplyBatch): Promise<ApplyResult>;
}

export interface ApplierOptions {
  /**
   * Run the statement as a named prepared statement, planned once per connection
   * (about a third of the time of a page). Default true. Turn it off behind a
   * transaction pooler that does not keep prepared statements across transactions.
   */
  prepare?: boolean;
}

interface ApplyRow {
  ok: boolean;
  inserted: string[];
  quarantined: number;
  outbox_rows: number;
}

/**
 * The page applier. Each batch is one statement (see apply-statement.ts): events,
 * the email_status projection, outbox rows, quarantine and the cursor move commit
 * together or not at all. The cursor row must exist (ensureCursor) for a
 * compare-and-set to succeed.
 */
export function createApplier(
  store: Store,
  route: (type: string) => EventRoute | null,
  opts: ApplierOptions = {},
): Applier {
  const text = applyStatement(quoteSchema(store.schema));
  // Named after its text: one name per schema and version of the statement, short of the 63-byte limit.
  const name =
    opts.prepare === false
      ? undefined
      : `feedsync_apply_${createHash('sha256').update(text).digest('hex').slice(0, 16)}`;

  return {
    async apply(batch) {
      const unique: ServiceEvent[] = [];
      const seen = new Set<string>();
      const ids: string[] = [];
      const types: string[] = [];
      const createdAt: string[] = [];
      const data: string[] = [];
      const queues: (string | null)[] = [];
      const jobNames: (string | null)[] = [];
      const raws: string[] = [];
      const reasons: string[] = [];
      const routes = new Map<string, EventRoute | null>();
      let unstorableCount = 0;

      for (const event of batch.events) {
        if (seen.has(event.id)) continue;
        seen.add(event.id);
        const json = JSON.stringify(event.data);
        const problem = unstorable(event, json);
        if (problem) {
          unstorableCount += 1;
          raws.push(JSON.stringify(event));
          reasons.push(problem);
          continue;
        }
        let r = routes.get(event.type);
        if (r === undefined) {
          r = route(event.type);
          routes.set(event.type, r);
        }
        unique.push(event);
        ids.push(event.id);
        types.push(event.type);
        createdAt.push(event.created_at);
        data.push(json);
        queues.push(r?.queue ?? null);
        jobNames.push(r?.jobName ?? null);
      }
      for (const item of batch.quarantine) {
        raws.push(withoutNul(item.raw));
        reasons.push(withoutNul(item.reason));
      }

      if (batch.cursor === undefined && unique.length === 0 && raws.length === 0) {
        return {
          status: 'applied',
          inserted: [],
          duplicates: batch.events.length,
          quarantined: 0,
          outboxRows: 0,
        };
      }

      const values = [
        batch.source,
        batch.receivedVia,
        ids,
        types,
        createdAt,
        data,
        queues,
        jobNames,
        batch.cursor !== undefined,
        batch.cursor?.prev ?? null,
        batch.cursor?.next ?? null,
        raws,
        reasons,
      ];
      const { rows } = await store.pool.query<ApplyRow>(
        name === undefined ? { text, values } : { name, text, values },
      );
      const row = rows[0]!;
      if (!row.ok) {
        return { status: 'cursor-conflict', inserted: [], duplicates: 0, quarantined: 0, outboxRows: 0 };
      }
      const fresh = new Set(row.inserted);
      const inserted = unique.filter((e) => fresh.has(e.id));
      return {
        status: 'applied',
        inserted,
        duplicates: batch.events.length - unstorableCount - inserted.length,
        quarantined: row.quarantined,
        outboxRows: row.outbox_rows,
      };
    },
  };
}

/** Postgres text and jsonb cannot hold U+0000; such an event goes to quarantine instead. */
function unstorable(event: ServiceEvent, dataJson: string): string | null {
  if (event.id.includes('\u0000') || event.type.includes('\u0000') || event.created_at.includes('\u0000')) {
    return 'a NUL character in id, type or created_at, which Postgres cannot store';
  }
  // An escaped backslash before "u0000" is text, not a NUL: count the backslashes.
  if (/(?<!\\)(?:\\\\)*\\u0000/.test(dataJson)) {
    return 'a NUL character in data, which Postgres jsonb cannot store';
  }
  return null;
}

function withoutNul(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '\\u0000') : text;
}
