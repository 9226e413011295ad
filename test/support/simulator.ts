import { afterAll, beforeAll } from 'vitest';
import { type Simulator, type SimulatorOptions, startSimulator } from '../../src/simulator/index.js';

/** A key every simulator started without `keyPrefix` accepts: the default account's in tests. */
export const TEST_API_KEY = 'sim_test_0123456789abcdef';

/**
 * Starts a simulator in this process on a free loopback port, with webhook retry
 * gaps compressed a thousandfold and TEST_API_KEY's account as the default one
 * (what `emitContactEvent`, `setBacklog` and key-less `/_sim` calls act on).
 * Close it with `sim.close()`.
 */
export function startTestSimulator(opts: SimulatorOptions = {}): Promise<Simulator> {
  // A fixed key prefix refuses TEST_API_KEY: the simulator's own default key then.
  const defaultKey = opts.keyPrefix === undefined ? { defaultKey: TEST_API_KEY } : {};
  return startSimulator({ port: 0, host: '127.0.0.1', timeScale: 0.001, ...defaultKey, ...opts });
}

/**
 * One simulator for a whole test file: started in beforeAll, closed in afterAll.
 * Read it through the returned getter (it exists only once beforeAll has run).
 */
export function useSimulator(opts: SimulatorOptions = {}): () => Simulator {
  let sim: Simulator | undefined;
  beforeAll(async () => {
    sim = await startTestSimulator(opts);
  });
  afterAll(async () => {
    await sim?.close();
  });
  return () => {
    if (!sim) throw new Error('the simulator is not started yet: read it inside a test or hook');
    return sim;
  };
}
