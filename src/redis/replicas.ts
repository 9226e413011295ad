import type { Cluster, Redis } from 'ioredis';
import { RedisError } from '../errors.js';
import type { RedisConnection } from './connect.js';

/**
 * How many replicas must hold a batch of jobs before it counts as published, and of
 * which master: the one that holds the queues' hash slot (every key of a BullMQ
 * queue is in that one slot, so no other master is ever written).
 */
export interface WaitPlan {
  /** Replicas to wait for after each batch (Redis WAIT); 0: none. */
  readonly replicas: number;
  /** Why this number, in words, for doctor. */
  readonly why: string;
  /** True when REDIS_WAIT_REPLICAS gave the number, false when it is the default for this set-up. */
  readonly configured: boolean;
  /** The master that holds the queues' slot, on the connection that writes to it. */
  readonly master: Redis;
  /** Replicas connected to that master when the plan was made; null when it would not say. */
  readonly connectedReplicas: number | null;
  /** In a cluster: the queues' slot, checked again after each WAIT. Null elsewhere. */
  readonly slot: number | null;
}

/**
 * Resolves REDIS_WAIT_REPLICAS for this connection: the value given, else 1 under
 * Sentinel (it exists to fail over) and wherever the queues' master has a replica
 * now (a Cluster's, or a managed server's that fails over by DNS), else 0: a master
 * with no replica has nothing to fail over to, and a WAIT on it would never succeed.
 */
export async function planWait(
  connection: RedisConnection,
  configured: number | null,
  prefix: string,
): Promise<WaitPlan> {
  const { master, slot } = await queuesMaster(connection, prefix);
  // Without INFO, a cluster's own table still lists the replicas it has not marked failed.
  const connectedReplicas =
    (await replicasOf(master)) ??
    (slot === null ? null : (connection.client as Cluster).slots[slot]!.length - 1);
  const count =
    connectedReplicas === null ? 'an unknown number of replicas' : plural(connectedReplicas, 'replica');
  const plan = { master, slot, connectedReplicas };
  if (configured !== null) {
    return {
      ...plan,
      replicas: configured,
      configured: true,
      why: `set by REDIS_WAIT_REPLICAS; the queues' master has ${count}`,
    };
  }
  if (connection.mode === 'sentinel') {
    return {
      ...plan,
      replicas: 1,
      configured: false,
      why: `the default under Sentinel, whose failover promotes a replica; the master has ${count}`,
    };
  }
  const whose = connection.mode === 'cluster' ? `the master holding the queues' slot ${slot}` : 'the server';
  if (connectedReplicas !== null && connectedReplicas > 0) {
    return {
      ...plan,
      replicas: 1,
      configured: false,
      why: `the default: ${whose} has ${count}, any of which a failover may promote`,
    };
  }
  return {
    ...plan,
    replicas: 0,
    configured: false,
    why: `the default: ${whose} has ${count}, so there is nothing to fail over to and nothing to wait for`,
  };
}

/**
 * Waits until the plan's replicas hold what this connection wrote to the queues'
 * master (Redis WAIT on the connection that wrote). Throws when fewer answer within
 * `timeoutMs`, or when the queues' slot moved to another master meanwhile (a cluster
 * failover in the middle of the batch): the caller then counts the batch as not
 * published and adds it again on a fresh connection, which the job ids make harmless.
 * Replication is asynchronous: without this a failover loses the last jobs a master
 * acknowledged.
 */
export async function waitForReplicas(
  connection: RedisConnection,
  plan: WaitPlan,
  timeoutMs: number,
): Promise<void> {
  if (plan.replicas === 0) return;
  const acked = await plan.master.wait(plan.replicas, timeoutMs);
  if (acked < plan.replicas) {
    throw new RedisError(
      `Redis: ${acked} of the ${plan.replicas} replicas (REDIS_WAIT_REPLICAS) acknowledged the jobs within ${timeoutMs} ms`,
      { code: 'REDIS_NOT_REPLICATED', command: 'wait' },
    );
  }
  if (plan.slot !== null && ownerKey(connection.client as Cluster, plan.slot) !== keyOf(plan.master)) {
    throw new RedisError("Redis: the queues' slot moved to another master during the batch", {
      code: 'REDIS_SLOT_MOVED',
      command: 'wait',
    });
  }
}

async function queuesMaster(
  connection: RedisConnection,
  prefix: string,
): Promise<{ master: Redis; slot: number | null }> {
  if (connection.mode !== 'cluster') return { master: connection.masters()[0]!, slot: null };
  const cluster = connection.client as Cluster;
  // The slot of the prefix is the slot of every key under it: the hash tag decides.
  const slot = await cluster.cluster('KEYSLOT', prefix);
  const key = ownerKey(cluster, slot);
  const master = connection.masters().find((node) => keyOf(node) === key);
  if (!master) {
    throw new RedisError(`Redis: no master serves the queues' slot ${slot}`, {
      code: 'CLUSTERDOWN',
      command: 'cluster',
    });
  }
  return { master, slot };
}

/** `host:port` of the master ioredis sends a slot's commands to now. */
function ownerKey(cluster: Cluster, slot: number): string | undefined {
  return cluster.slots[slot]?.[0];
}

function keyOf(node: Redis): string {
  return `${node.options.host}:${node.options.port}`;
}

/** `connected_slaves` of a master's INFO; null when it does not answer it (a managed Redis may refuse INFO). */
async function replicasOf(master: Redis): Promise<number | null> {
  try {
    const m = /^connected_slaves:(\d+)\s*$/m.exec(await master.info('replication'));
    return m ? Number(m[1]) : null;
  } catch (err) {
    // A refusal (a renamed or forbidden command) leaves the number unknown; a failed connection fails the plan.
    if ((err as Error).name === 'ReplyError') return null;
    throw err;
  }
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}
