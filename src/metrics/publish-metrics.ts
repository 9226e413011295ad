import { Counter, Histogram, type Registry } from 'prom-client';

/** The relay's metrics, the same in the worker's registry and the receiver's, so a dashboard sums both. */
export interface PublishMetrics {
  /** Counts jobs handed to BullMQ. */
  onPublished(queue: string, count: number): void;
  /** One job's delay from its row's commit to its publication. */
  onPublishDelay(seconds: number): void;
}

/** Registers `feedsync_jobs_published_total` and `feedsync_publish_delay_seconds` in `registry`. */
export function publishMetrics(registry: Registry): PublishMetrics {
  const published = new Counter({
    name: 'feedsync_jobs_published_total',
    help: 'Jobs handed to BullMQ, by queue.',
    labelNames: ['queue'],
    registers: [registry],
  });
  // From memory a job follows its commit by milliseconds; from the outbox (a crash's rows,
  // Redis back after an outage, a sweep) by up to a minute or more: the upper buckets tell which.
  const delay = new Histogram({
    name: 'feedsync_publish_delay_seconds',
    help: "Time from an outbox row's commit to its job's publication to BullMQ.",
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 15, 30, 60, 300],
    registers: [registry],
  });
  return {
    onPublished: (queue, count) => published.inc({ queue }, count),
    onPublishDelay: (seconds) => delay.observe(seconds),
  };
}
