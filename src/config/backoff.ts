/** The longest a failing source waits between two turns: ten intervals, after many failures in a row. */
export function maxBackoffMs(intervalMs: number): number {
  return intervalMs * 10;
}
