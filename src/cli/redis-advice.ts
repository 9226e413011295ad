/**
 * What to do about the error that kept Redis from taking jobs, by its Redis error
 * code: "check that Redis runs" is wrong advice for a Redis that runs and refuses.
 */
export function redisAdvice(err: unknown): string {
  const e = err as { code?: unknown; redisCode?: unknown } | null;
  const code = e?.redisCode ?? e?.code;
  if (code === 'OOM') {
    return 'Redis refused the jobs for want of memory (OOM: maxmemory reached); give it more memory, or let consumers work off the kept jobs';
  }
  if (code === 'READONLY') {
    return 'Redis answered READONLY: REDIS_URL reaches a replica (a failover moved the master?); point it at the master, or use REDIS_SENTINELS or a cluster';
  }
  if (code === 'NOAUTH' || code === 'WRONGPASS' || code === 'NOPERM') {
    return `Redis refused the credentials or the command (${code}); check the user and password in REDIS_URL`;
  }
  return 'check that Redis runs';
}
