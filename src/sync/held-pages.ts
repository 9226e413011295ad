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
   * Bytes, 10 MiB. A parsed page costs several times its response until its commit is
   * done (the text, the objects, the statement's JSON, the driver's buffer), and with
   * Node's defaults V8 lets the old generation grow to about four times what is live
   * before it collects: 10 MiB (one answer of the default response limit and 2 MiB
   * besides) keeps a plain `node` worker with pages of 4 MB under the manifests' 256 MiB
   * where 16 MiB did not (docs/BENCHMARKS.md, Memory with events that reach the relay).
   * A page larger than 2 MiB is then not fetched ahead of the commit of the one before;
   * small pages are held by count long before this binds.
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
  /** Response bytes held at once: pages fetched ahead, the load in a commit, and the answer on its way. */
  maxHeldBytes: number;
  /** The largest answer the fetcher accepts (FEED_MAX_RESPONSE_BYTES): what one more request may add. */
  maxPageBytes: number;
}

/**
 * The pages a catch-up holds: the buffer the fetcher fills and the load the
 * committer has taken, counted in pages and in the bytes of their responses. A
 * parsed page costs a few times its response in memory, so bytes, not pages, are
 * what keeps the worker under its memory limit whatever the page size; for small
 * pages the page counts bind first and the pipelining is as it was.
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
   * Whether the fetcher may ask for another page: one more answer of the largest
   * size still fits under maxHeldBytes. With nothing held it always may, so a page
   * larger than the budget is still read (alone).
   */
  roomForAnother(): boolean {
    if (this.#buffer.length >= this.#limits.maxBuffered) return false;
    return this.bytes === 0 || this.bytes + this.#limits.maxPageBytes <= this.#limits.maxHeldBytes;
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
