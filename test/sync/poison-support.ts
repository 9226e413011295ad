import type { Logger } from '../../src/logger.js';
import { createSync, type RunResult } from '../../src/sync/sync.js';
import { testConfig } from '../support/config.js';
import { quarantinedRaw } from '../support/poison-items.js';
import { startFeedServer } from './feed-server.js';
import type { Sandbox } from './harness.js';

/** One `sync --once` of a source over a feed server that serves `items`, whatever they are. */
export async function syncItems(
  box: Sandbox,
  logger: Logger,
  items: readonly unknown[],
  source: string,
  env: Record<string, string> = {},
): Promise<RunResult> {
  const feed = await startFeedServer(items);
  try {
    const config = testConfig(
      { schema: box.schema, prefix: box.prefix, baseUrl: feed.baseUrl },
      { FEED_SOURCE: source, FEED_PAGE_LIMIT: '10', ...env },
    );
    const sync = createSync(config, { logger, store: box.store, retryDeps: { sleep: async () => {} } });
    try {
      return await sync.runOnce();
    } finally {
      await sync.close();
    }
  } finally {
    await feed.close();
  }
}

/** What one source holds after a run: the ledger the poison tests check against what was served. */
export interface Ledger {
  stored: Set<string>;
  /** Raw text to reason, one row each. */
  quarantine: Map<string, string>;
  quarantineRows: number;
  cursor: string | null;
  conflicts: number;
}

export async function ledgerOf(box: Sandbox, source: string): Promise<Ledger> {
  const s = `"${box.schema}"`;
  const q = <T extends object>(sql: string) => box.store.pool.query<T>(sql, [source]).then((r) => r.rows);
  const events = await q<{ id: string }>(`SELECT id FROM ${s}.events WHERE source = $1`);
  const quarantine = await q<{ raw: string; reason: string }>(
    `SELECT raw, reason FROM ${s}.quarantine WHERE source = $1`,
  );
  const cursor = await q<{ after_id: string | null }>(`SELECT after_id FROM ${s}.cursors WHERE source = $1`);
  const conflicts = await q<{ n: number }>(`SELECT count(*)::int AS n FROM ${s}.conflicts WHERE source = $1`);
  return {
    stored: new Set(events.map((r) => r.id)),
    quarantine: new Map(quarantine.map((r) => [r.raw, r.reason])),
    quarantineRows: quarantine.length,
    cursor: cursor[0]?.after_id ?? null,
    conflicts: conflicts[0]?.n ?? 0,
  };
}

export interface Accounting {
  /** Served items, repeats of an id included. */
  checked: number;
  /** Items whose id is stored (a repeat counts by the version stored first). */
  stored: number;
  /** Items whose raw text is in quarantine. */
  quarantined: number;
  /** Neither stored nor quarantined. */
  lost: number;
  /**
   * An item served once that is both stored and quarantined, a stored id never
   * served, or a quarantine row that is no served item's raw text.
   */
  duplicated: number;
}

/**
 * Accounts for every served item: its id stored, or its raw text (quarantinedRaw)
 * in quarantine. A repeat of an id with other content may be either: stored when
 * the first copy could not be, quarantined when it cannot be stored itself.
 */
export function account(items: readonly unknown[], ledger: Ledger): Accounting {
  const idOf = (item: unknown) => {
    const id = (item as { id?: unknown } | null)?.id;
    return typeof id === 'string' && id.length > 0 ? id : null;
  };
  const copies = new Map<string, number>();
  for (const item of items) {
    const id = idOf(item);
    if (id !== null) copies.set(id, (copies.get(id) ?? 0) + 1);
  }
  const raws = new Set<string>();
  const out: Accounting = { checked: 0, stored: 0, quarantined: 0, lost: 0, duplicated: 0 };
  for (const item of items) {
    out.checked++;
    const id = idOf(item);
    const raw = quarantinedRaw(item);
    raws.add(raw);
    const stored = id !== null && ledger.stored.has(id);
    const quarantined = ledger.quarantine.has(raw);
    if (stored && quarantined && copies.get(id!) === 1) out.duplicated++;
    else if (quarantined) out.quarantined++;
    else if (stored) out.stored++;
    else out.lost++;
  }
  out.duplicated += [...ledger.stored].filter((id) => !copies.has(id)).length;
  out.duplicated += [...ledger.quarantine.keys()].filter((raw) => !raws.has(raw)).length;
  return out;
}
