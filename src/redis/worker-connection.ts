import type { Cluster, Redis } from 'ioredis';
import type { RedisSettings } from '../config/redis-settings.js';
import { connectRedis, type RedisMode } from './connect.js';

/** A connection for BullMQ Workers, in the mode the server was found in. */
export interface WorkerConnection {
  readonly mode: RedisMode;
  /** What a Worker takes as `connection`; BullMQ duplicates it for its blocking reads. */
  readonly client: Redis | Cluster;
  disconnect(): void;
}

/**
 * Connects once as feedsync does (fail fast, bounded by `timeoutMs`, the mode found
 * and, in a cluster, the prefix's hash tag checked), so a wrong address fails at
 * start with one line; then hands back a copy of that connection made for Workers.
 * A Worker blocks on Redis and lives for hours: its connection waits on a command
 * instead of failing it (BullMQ requires `maxRetriesPerRequest: null`), keeps
 * commands while it reconnects, and reconnects on its own after a blip or a failover.
 */
export async function connectForWorkers(
  settings: RedisSettings,
  opts: { prefix: string; timeoutMs: number },
): Promise<WorkerConnection> {
  const probe = await connectRedis(settings, opts);
  try {
    const lasting = {
      maxRetriesPerRequest: null,
      enableOfflineQueue: true,
      lazyConnect: false,
      // A blocking read waits longer than any command timeout.
      commandTimeout: undefined,
      retryStrategy: (times: number) => Math.min(200 * 2 ** times, 10_000),
      sentinelRetryStrategy: (times: number) => Math.min(200 * 2 ** times, 10_000),
    };
    let client: Redis | Cluster;
    if (probe.mode === 'cluster') {
      const cluster = probe.client as Cluster;
      client = cluster.duplicate([], {
        enableOfflineQueue: true,
        lazyConnect: false,
        clusterRetryStrategy: lasting.retryStrategy,
        redisOptions: { ...cluster.options.redisOptions, ...lasting },
      });
    } else {
      client = (probe.client as Redis).duplicate(lasting);
    }
    // BullMQ reports the failures it sees through the Worker's own 'error' event.
    client.on('error', () => {});
    return { mode: probe.mode, client, disconnect: () => client.disconnect() };
  } finally {
    probe.disconnect();
  }
}
