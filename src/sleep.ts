import { setTimeout as sleepTimer } from 'node:timers/promises';

/** Waits `ms`, or rejects with the signal's reason once it aborts. Modules take a `sleep` like it, so tests can pass their own. */
export const defaultSleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  sleepTimer(ms, undefined, signal ? { signal } : undefined);
