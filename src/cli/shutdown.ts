import type { Logger } from '../logger.js';

/**
 * The first SIGTERM or SIGINT aborts the returned signal, so the run finishes or
 * rolls back the page in hand, releases its lock and exits; a second one exits at
 * once (an open transaction rolls back when the connection drops).
 */
export function shutdownSignal(
  logger: Logger,
  exit: (code: number) => void = process.exit,
  /** What the first signal logs: what this process finishes before it exits. */
  stopping = 'stopping after the page in hand',
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
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGTERM', handler);
      process.off('SIGINT', handler);
    },
  };
}
