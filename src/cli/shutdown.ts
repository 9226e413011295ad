import type { Logger } from '../logger.js';

/**
 * The first SIGTERM or SIGINT aborts the returned signal, so the run finishes or
 * rolls back the page in hand, releases its lock and exits; a second one exits at
 * once (an open transaction rolls back when the connection drops). With
 * `followParent` (started by npx, launchedByNpm), the end of the parent process
 * counts as a first SIGTERM: npx ends on a signal without passing it on, and the pid a
 * script holds after `npx feedsync sync --watch &` is npx's.
 */
export function shutdownSignal(
  logger: Logger,
  exit: (code: number) => void = process.exit,
  /** What the first signal logs: what this process finishes before it exits. */
  stopping = 'stopping after the page in hand',
  followParent = false,
): {
  signal: AbortSignal;
  dispose: () => void;
} {
  const controller = new AbortController();
  const handler = (name: NodeJS.Signals): void => {
    if (controller.signal.aborted) {
      logger.warn({ signal: name }, 'second signal: exiting now');
      exit(1);
      return;
    }
    logger.info({ signal: name }, `${stopping}; send it again to exit now`);
    controller.abort(new Error(`received ${name}`));
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  // A Ctrl-C reaches npx and this process alike: npx's end then is no second signal.
  const unfollow = followParent
    ? onParentGone(() => {
        if (controller.signal.aborted) return;
        logger.info('the npx (or npm) process that started this one ended; it passes no signal on');
        handler('SIGTERM');
      })
    : () => {};
  return {
    signal: controller.signal,
    dispose: () => {
      unfollow();
      process.off('SIGTERM', handler);
      process.off('SIGINT', handler);
    },
  };
}

/**
 * Calls `then` once when this process's parent ends (it is re-parented), checked every
 * `everyMs`; returns what stops the check. The timer keeps no process alive.
 */
export function onParentGone(then: () => void, everyMs = 250): () => void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    then();
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
