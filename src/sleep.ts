import { setTimeout as sleepTimer } from 'node:timers/promises';

/** Waits `ms`, or rejects with the signal's reason once it aborts. Modules take a `sleep` like it, so tests can pass their own. */
export const defaultSleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  sleepTimer(ms, undefined, signal ? { signal } : undefined);

/**
 * A controller that aborts with the first of `signals` to abort, for one turn.
 * Unlike AbortSignal.any, `dispose()` detaches it from them completely: AbortSignal.any
 * leaves a WeakRef on every source signal until it is collected, and on a signal that
 * lives as long as the process (the shutdown signal) those gather turn after turn.
 */
export function linkedAbort(...signals: readonly AbortSignal[]): {
  signal: AbortSignal;
  abort: (reason?: unknown) => void;
  dispose: () => void;
} {
  const controller = new AbortController();
  const listeners = signals.map((source) => {
    const onAbort = (): void => controller.abort(source.reason);
    if (source.aborted) controller.abort(source.reason);
    else source.addEventListener('abort', onAbort, { once: true });
    return () => source.removeEventListener('abort', onAbort);
  });
  return {
    signal: controller.signal,
    abort: (reason) => controller.abort(reason),
    dispose: () => {
      for (const off of listeners) off();
    },
  };
}
