/** The budget a service states in its answers' headers. */
export interface StatedBudget {
  /** Requests allowed in one window. */
  limit: number;
  /** Requests left in the current window. */
  remaining: number | null;
  /** Seconds until the current window ends (a delta, as Resend and the IETF draft send it). */
  resetSeconds: number | null;
  /** The window's length in seconds, when a `RateLimit-Policy` (`5;w=1`) says it. */
  windowSeconds: number | null;
}

export type Headers = Record<string, string | string[] | undefined>;

/**
 * Reads `RateLimit-Limit`, `-Remaining`, `-Reset` and `-Policy`, their `X-RateLimit-*`
 * forms, and the draft's combined `RateLimit: limit=5, remaining=4, reset=1`, in any
 * letter case. Null when the answer states no limit (or a limit that is not a positive
 * number): the service says nothing, and only FEED_MAX_REQUESTS_PER_SECOND applies.
 */
export function statedBudget(headers: Headers): StatedBudget | null {
  const lower = new Map<string, string>();
  for (const [name, value] of Object.entries(headers)) {
    const first = Array.isArray(value) ? value[0] : value;
    if (first !== undefined) lower.set(name.toLowerCase(), first);
  }
  const field = (name: string): string | undefined =>
    lower.get(`ratelimit-${name}`) ?? lower.get(`x-ratelimit-${name}`);
  const combined = parseCombined(lower.get('ratelimit'));
  const limit = leadingNumber(field('limit')) ?? combined.limit;
  if (limit === null || limit <= 0) return null;
  return {
    limit,
    remaining: leadingNumber(field('remaining')) ?? combined.remaining,
    resetSeconds: leadingNumber(field('reset')) ?? combined.reset,
    windowSeconds: policyWindow(field('policy')),
  };
}

/** The number a field starts with (`5`, `5;w=1`, `5, 100;w=60`), or null. */
function leadingNumber(value: string | undefined): number | null {
  if (value === undefined) return null;
  const match = /^\s*(\d+(?:\.\d+)?)/.exec(value);
  return match ? Number(match[1]) : null;
}

/** `w=` of the first policy (`5;w=1`), or null. */
function policyWindow(value: string | undefined): number | null {
  const match = value === undefined ? null : /;\s*w\s*=\s*(\d+(?:\.\d+)?)/.exec(value);
  const seconds = match ? Number(match[1]) : 0;
  return seconds > 0 ? seconds : null;
}

function parseCombined(value: string | undefined): {
  limit: number | null;
  remaining: number | null;
  reset: number | null;
} {
  const read = (name: string): number | null => {
    const match =
      value === undefined
        ? null
        : new RegExp(`(?:^|[,;\\s])${name}\\s*=\\s*(\\d+(?:\\.\\d+)?)`, 'i').exec(value);
    return match ? Number(match[1]) : null;
  };
  return { limit: read('limit'), remaining: read('remaining'), reset: read('reset') };
}
