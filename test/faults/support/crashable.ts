import type pg from 'pg';
import type { Publisher } from '../../../src/queue/publisher.js';
import { createStore, type Store } from '../../../src/store/db.js';

/** Thrown at the crash point and by everything after it. */
export class Crash extends Error {
  constructor(where: string) {
    super(`crashed ${where}`);
  }
}

/**
 * One process's worth of connections that can "crash": after `crash()`, every
 * query and every checkout is refused, and each connection handed back is
 * destroyed rather than pooled, so Postgres rolls back whatever it had open, as
 * when a process dies. Statements already sent still complete, as they would.
 */
export function crashableStore(
  url: string,
  schema: string,
): {
  store: Store;
  crash(where: string): never;
  readonly crashed: boolean;
  close(): Promise<void>;
} {
  const real = createStore({ url, schema, applicationName: 'feedsync-faults-model' });
  let crashed: Crash | null = null;
  const check = () => {
    if (crashed) throw crashed;
  };
  const wrapClient = (client: pg.PoolClient): pg.PoolClient =>
    new Proxy(client, {
      get(target, prop) {
        if (prop === 'query') {
          return (...args: unknown[]) => {
            if (crashed) return Promise.reject(crashed);
            return (target.query as (...a: unknown[]) => unknown)(...args);
          };
        }
        if (prop === 'release') {
          return (err?: Error | boolean) => target.release(crashed ? true : err);
        }
        const value = Reflect.get(target, prop, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  const pool = new Proxy(real.pool, {
    get(target, prop) {
      if (prop === 'query') {
        return (...args: unknown[]) => {
          if (crashed) return Promise.reject(crashed);
          return (target.query as (...a: unknown[]) => unknown)(...args);
        };
      }
      if (prop === 'connect') {
        return async () => {
          check();
          return wrapClient(await target.connect());
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return {
    store: {
      pool: pool as unknown as pg.Pool,
      schema,
      serverTimeoutMs: real.serverTimeoutMs,
      close: async () => {},
    },
    crash(where) {
      crashed ??= new Crash(where);
      throw crashed;
    },
    get crashed() {
      return crashed !== null;
    },
    close: () => real.close(),
  };
}

/** A publisher that crashes before or after the n-th addBulk, as asked. */
export function crashablePublisher(
  real: Publisher,
  plan: { before?: number; after?: number },
  crash: (where: string) => never,
  crashed: () => boolean,
): Publisher {
  let calls = 0;
  return {
    ...real,
    async addBulk(queue, jobs) {
      if (crashed()) crash('(already)');
      calls++;
      if (calls === plan.before) crash(`before addBulk #${calls}`);
      await real.addBulk(queue, jobs);
      if (calls === plan.after) crash(`after addBulk #${calls}`);
    },
  };
}
