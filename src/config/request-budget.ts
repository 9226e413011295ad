/**
 * FEED_RATE_SHARE and FEED_MAX_REQUESTS_PER_SECOND, and a sources file's `rate_share`
 * and `max_requests_per_second`: read one way for both. Each returns the value, or
 * throws a message (without the variable's name: the caller names where it came from).
 */

/** The share of a stated budget: a number above 0 and at most 1, as text (the environment) or a JSON number. */
export function readRateShare(value: unknown): number {
  const n = numberOf(value);
  if (n === null || !(n > 0 && n <= 1))
    throw new Error('must be a number above 0 and at most 1 (0.5 is half)');
  return n;
}

/** Requests a second: a number above 0, at most 10,000. */
export function readMaxPerSecond(value: unknown): number {
  const n = numberOf(value);
  if (n === null || !(n > 0 && n <= 10_000))
    throw new Error('must be a number of requests a second above 0, at most 10000');
  return n;
}

function numberOf(value: unknown): number | null {
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(value)) return Number(value);
  return null;
}

/** A source's own limits in the sources file (src/budget/ BudgetLimits); what it leaves out is the variables'. */
export interface SourceBudget {
  share?: number;
  maxPerSecond?: number | null;
}
