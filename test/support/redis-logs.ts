import { expect } from 'vitest';

/**
 * Bytes of log a failed run may write, stdout and stderr together, at LOG_LEVEL=trace.
 * Before errors were cut down to message, code and command name, `sync --once` over 300
 * events against a Redis refusing writes wrote 173,691 bytes (each failed command with
 * its arguments: BullMQ's Lua source and job data with 12 addresses); now 4,435.
 */
export const FAILED_RUN_LOG_BOUND = 24 * 1024;

/** What must never be in a log: recipients' addresses, job data, Lua source, secrets. */
export function expectNoRedisArguments(log: string, secrets: readonly string[] = []): void {
  // Recipients of the simulator's backlog are <outcome>+<n>@example.test.
  expect(log).not.toMatch(/[\w.+-]+@example\.test/);
  // A job's data as the outbox builds it.
  expect(log).not.toMatch(/"created_at"|\\"created_at\\"|"data":\{|\\"data\\"/);
  // BullMQ's scripts.
  expect(log).not.toMatch(/redis\.call|rcall\(|--\[\[|KEYS\[1\]|ARGV\[/);
  // ioredis's error fields that hold the arguments.
  expect(log).not.toMatch(/"args"|previousErrors/);
  for (const secret of secrets) expect(log).not.toContain(secret);
}
