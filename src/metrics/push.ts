import { Pushgateway, type Registry } from 'prom-client';
import type { Logger } from '../logger.js';

/**
 * Pushes a once run's metrics to a Pushgateway (PUSHGATEWAY_URL), added to the group
 * of `jobName` and `groupings`. A failed push is a warning: the run's work is done.
 */
export async function pushMetrics(
  url: string,
  registry: Registry,
  groupings: Record<string, string>,
  log: Logger,
): Promise<void> {
  try {
    await new Pushgateway(url, {}, registry).pushAdd({ jobName: 'feedsync', groupings });
  } catch (err) {
    log.warn({ err }, 'could not push metrics to the Pushgateway');
  }
}
