/**
 * The cursor's event as a later turn checks it: the id before it in the feed (null: the
 * feed's start), which a request reads after to be served that event first, and a
 * digest of its content (src/sync/cursor-check.ts).
 */
export interface CursorEvent {
  before: string | null;
  digest: string;
}

/** A batch's compare-and-set of the cursor: from `prev` to `next`, with what the next turn checks. */
export interface CursorMove {
  prev: string | null;
  next: string;
  check?: CursorEvent | null;
}
