import { CONFIG_DEFAULTS } from '../config/config-defaults.js';

const MiB = 1024 * 1024;

/** What a catch-up holds by default, each in one place: CatchUpOptions names them. */
export const HELD_PAGES_DEFAULTS: Readonly<HoldLimits> = Object.freeze({
  /** Pages, two loads: fetching goes on while a full load commits. */
  maxBuffered: 20,
  /**
   * Pages: a load of ten costs about half the database time per event of ten loads of
   * one (docs/BENCHMARKS.md).
   */
  maxPerCommit: 10,
  /**
   * Bytes, 10 MiB: the budget of a process (sync/byte-budget.ts), which holds at most this
   * and one answer more. A parsed page costs several times its response until its commit
   * is done (the text, the objects, the statement's JSON, the driver's buffer), and with
   * Node's defaults V8 lets the old generation grow to about four times what is live
   * before it collects: 10 MiB keeps a plain `node` worker under the manifests' 256 MiB
   * with 8 lanes of pages near the response limit (docs/BENCHMARKS.md, Memory by lanes).
   * Small pages are held by count long before this binds.
   */
  maxHeldBytes: 10 * MiB,
  /** Bytes: FEED_MAX_RESPONSE_BYTES's default, so a caller that leaves it out holds pages as a configured worker does. */
  maxPageBytes: CONFIG_DEFAULTS.FEED_MAX_RESPONSE_BYTES,
});

/** Limits of what one catch-up holds in memory at once. */
export interface HoldLimits {
  /** Pages fetched ahead of the commits. */
  maxBuffered: number;
  /** Pages joined into one transaction. */
  maxPerCommit: number;
  /** The budget's capacity: a load has at most this less one answer of the largest size. */
  maxHeldBytes: number;
  /** The largest answer the fetcher accepts (FEED_MAX_RESPONSE_BYTES). */
  maxPageBytes: number;
}

/**
 * The pages a catch-up holds: the buffer the fetcher fills and the load the
 * committer has taken, counted in pages and in the bytes of their responses. The
 * bytes are the process's budget's to bound (sync/byte-budget.ts); here they size the
 * loads, and the page counts bound the buffer.
 */
export class HeldPages<T extends { bytes: number }> {
  readonly #limits: HoldLimits;
  readonly #buffer: T[] = [];
  #bufferedBytes = 0;
  #committingBytes = 0;

  constructor(limits: HoldLimits) {
    this.#limits = limits;
  }

  /** Pages waiting for a commit, oldest first. */
  get buffered(): readonly T[] {
    return this.#buffer;
  }

  /** Response bytes held now: the buffer and the load being committed. */
  get bytes(): number {
    return this.#bufferedBytes + this.#committingBytes;
  }

  /** The most bytes one load may have (at least one page is always taken). */
  get loadBytes(): number {
    return Math.max(1, this.#limits.maxHeldBytes - this.#limits.maxPageBytes);
  }

  /**
   * Whether the fetcher may ask for another page: the buffer is not full. What the
   * answer weighs is the budget's to allow, when it is known, never the worst case here.
   */
  roomForAnother(): boolean {
    return this.#buffer.length < this.#limits.maxBuffered;
  }

  push(page: T): void {
    this.#buffer.push(page);
    this.#bufferedBytes += page.bytes;
  }

  /** Whether the buffer holds a whole load, by pages or by bytes. */
  fullLoad(): boolean {
    const pages = Math.min(this.#limits.maxPerCommit, this.#limits.maxBuffered);
    return this.#buffer.length >= pages || this.#bufferedBytes >= this.loadBytes;
  }

  /**
   * Takes the next load from the buffer: up to maxPerCommit pages and loadBytes, at
   * least one page. Its bytes stay held until `committed`.
   */
  take(): T[] {
    let count = 0;
    let bytes = 0;
    for (const page of this.#buffer) {
      if (count === this.#limits.maxPerCommit) break;
      if (count > 0 && bytes + page.bytes > this.loadBytes) break;
      count++;
      bytes += page.bytes;
    }
    const load = this.#buffer.splice(0, count);
    this.#bufferedBytes -= bytes;
    this.#committingBytes += bytes;
    return load;
  }

  /** The load's commit ended (done or failed): its pages are no longer held. */
  committed(load: readonly T[]): void {
    for (const page of load) this.#committingBytes -= page.bytes;
  }
}
