import { createHash } from 'node:crypto';

/**
 * The two int4 halves of a Postgres advisory-lock key for `parts`, taken from a
 * SHA-256 so that keys of different schemas and sources do not collide in practice.
 * Both values fit `pg_advisory_lock(int4, int4)`.
 */
export function advisoryKey(...parts: readonly string[]): [number, number] {
  const digest = createHash('sha256').update(parts.join('\u0000')).digest();
  return [digest.readInt32BE(0), digest.readInt32BE(4)];
}
