import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Queue } from 'bullmq';
import { Cluster, Redis } from 'ioredis';
import { freePort, type RedisServer, startRedisServer, waitFor } from './processes.js';

const run = promisify(execFile);

/** A Redis Cluster of private redis-server children on loopback. */
export interface LocalCluster {
  readonly nodes: readonly RedisServer[];
  /** Every node as a seed: `redis://127.0.0.1:a,redis://127.0.0.1:b,…` */
  readonly url: string;
  /** With `tls`: every node's TLS port as a seed, `rediss://127.0.0.1:a,…`; else null. */
  readonly tlsUrl: string | null;
  /** Stops every node by its pid and removes their directories. */
  dispose(): Promise<void>;
}

export interface LocalClusterOptions {
  tls?: { cert: string; key: string };
  /** Replicas per master (`--cluster-replicas`). Default 0. */
  replicas?: number;
  /** cluster-node-timeout: how long a silent master takes to be failed over. Default 2000 ms. */
  nodeTimeoutMs?: number;
}

/**
 * Starts `masters` cluster-enabled servers, and `replicas` more per master (each with
 * a free bus port of its own, so no port+10000 clash), joins them with
 * `redis-cli --cluster create`, then waits until every node says `cluster_state:ok`.
 */
export async function startLocalCluster(masters = 3, opts: LocalClusterOptions = {}): Promise<LocalCluster> {
  const replicas = opts.replicas ?? 0;
  const nodes: RedisServer[] = [];
  const dispose = async (): Promise<void> => {
    await Promise.allSettled(nodes.map((n) => n.dispose()));
  };
  const tlsPorts: number[] = [];
  try {
    const taken = new Set<number>();
    // A port freed a moment ago may come back from the next ask: never hand one out twice.
    const newPort = async (): Promise<number> => {
      for (;;) {
        const port = await freePort();
        if (!taken.has(port)) {
          taken.add(port);
          return port;
        }
      }
    };
    for (let i = 0; i < masters * (1 + replicas); i++) {
      const [port, busPort] = [await newPort(), await newPort()];
      const args = [
        '--cluster-enabled',
        'yes',
        '--cluster-port',
        String(busPort),
        '--cluster-node-timeout',
        String(opts.nodeTimeoutMs ?? 2000),
      ];
      if (opts.tls) {
        // The plain port stays open for the probes; the bus, and clients asking over TLS, get TLS ports.
        const tlsPort = await newPort();
        tlsPorts.push(tlsPort);
        args.push('--tls-port', String(tlsPort), '--tls-cluster', 'yes', '--tls-auth-clients', 'no');
        args.push(
          '--tls-cert-file',
          opts.tls.cert,
          '--tls-key-file',
          opts.tls.key,
          '--tls-ca-cert-file',
          opts.tls.cert,
        );
      }
      nodes.push(await startRedisServer({ port, args }));
    }
    // --cluster-config-file is relative to --dir: each node's own directory.
    const seeds = opts.tls ? tlsPorts : nodes.map((n) => n.port);
    const tlsArgs = opts.tls ? ['--tls', '--cacert', opts.tls.cert] : [];
    await run(
      'redis-cli',
      [
        ...tlsArgs,
        '--cluster',
        'create',
        ...seeds.map((p) => `127.0.0.1:${p}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ],
      {
        timeout: 30_000,
      },
    );
    for (const node of nodes) {
      const state = async () => String(await command(node.port, ['CLUSTER', 'INFO']));
      await waitFor(async () => /cluster_state:ok/.test(await state()), {
        timeoutMs: 20_000,
        what: `cluster_state:ok on ${node.port}`,
      });
    }
  } catch (err) {
    await dispose();
    throw err;
  }
  const tlsUrl = opts.tls ? tlsPorts.map((p) => `rediss://127.0.0.1:${p}`).join(',') : null;
  return { nodes, url: nodes.map((n) => n.url).join(','), tlsUrl, dispose };
}

/** Jobs of every state in a queue, counted through a Cluster connection (to the plain ports). */
export async function clusterJobCount(cluster: LocalCluster, prefix: string, queue: string): Promise<number> {
  const client = new Cluster(cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })));
  const q = new Queue(queue, { connection: client, prefix });
  try {
    const counts = await q.getJobCounts('waiting', 'active', 'completed', 'failed', 'delayed', 'prioritized');
    return Object.values(counts).reduce((a, b) => a + b, 0);
  } finally {
    await q.close();
    client.disconnect();
  }
}

/** A master, its replica and Sentinels watching them, on loopback. */
export interface LocalSentinel {
  readonly master: RedisServer;
  readonly replica: RedisServer;
  /** The first Sentinel. */
  readonly sentinel: RedisServer;
  readonly sentinels: readonly RedisServer[];
  /** The master's name in the Sentinels' configuration. */
  readonly name: string;
  /** The port of the master the first Sentinel names now. */
  masterPort(): Promise<number>;
  dispose(): Promise<void>;
}

/**
 * Starts a master, a replica of it, and `sentinels` Sentinels (a majority their
 * quorum, a master down after 1 s), each from a generated config file of its own,
 * and waits until every Sentinel knows the replica and, with several, each other.
 */
export async function startLocalSentinel(
  name = 'feedsync',
  opts: { sentinels?: number } = {},
): Promise<LocalSentinel> {
  const count = opts.sentinels ?? 1;
  const started: RedisServer[] = [];
  const confDir = mkdtempSync(join(tmpdir(), 'feedsync-sentinel-'));
  const dispose = async (): Promise<void> => {
    await Promise.allSettled(started.map((s) => s.dispose()));
    rmSync(confDir, { recursive: true, force: true });
  };
  try {
    const master = await startRedisServer();
    started.push(master);
    const replica = await startRedisServer({ args: ['--replicaof', '127.0.0.1', String(master.port)] });
    started.push(replica);
    await waitFor(() => info(replica.port, 'replication').then((t) => /master_link_status:up/.test(t)), {
      what: 'the replica in sync',
    });
    const sentinels: RedisServer[] = [];
    for (let i = 0; i < count; i++) {
      // A file each: a Sentinel rewrites its own with what it learns.
      const configFile = join(confDir, `sentinel-${i}.conf`);
      writeFileSync(
        configFile,
        [
          `sentinel monitor ${name} 127.0.0.1 ${master.port} ${Math.floor(count / 2) + 1}`,
          `sentinel down-after-milliseconds ${name} 1000`,
          `sentinel failover-timeout ${name} 10000`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      const sentinel = await startRedisServer({ configFile, args: ['--sentinel'] });
      started.push(sentinel);
      sentinels.push(sentinel);
    }
    const sentinel = sentinels[0]!;
    const masterPort = async (): Promise<number> => {
      const reply = (await command(sentinel.port, ['SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name])) as string[];
      return Number(reply[1]);
    };
    for (const s of sentinels) {
      await waitFor(
        async () => {
          const replicas = (await command(s.port, ['SENTINEL', 'REPLICAS', name])) as unknown[];
          const peers = (await command(s.port, ['SENTINEL', 'SENTINELS', name])) as unknown[];
          return replicas.length > 0 && peers.length === count - 1;
        },
        { timeoutMs: 30_000, what: `Sentinel ${s.port} to find the replica and the other Sentinels` },
      );
    }
    return { master, replica, sentinel, sentinels, name, masterPort, dispose };
  } catch (err) {
    await dispose();
    throw err;
  }
}

/** `INFO <section>` of a server on loopback. */
export async function info(port: number, section: string): Promise<string> {
  return (await command(port, ['INFO', section])) as string;
}

/** One command on a short-lived connection to a server on loopback. */
export async function command(port: number, args: readonly string[]): Promise<unknown> {
  const redis = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0 });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return await redis.call(args[0]!, ...args.slice(1));
  } finally {
    redis.disconnect();
  }
}
