import { afterAll, beforeAll } from 'vitest';
import { type Simulator, type SimulatorOptions, startSimulator } from '../../src/simulator/index.js';

/** A key every simulator started without `keyPrefix` accepts. */
export const TEST_API_KEY = 'sim_test_0123456789abcdef';

/**
 * Starts a simulator in this process on a free loopback port, with webhook retry
 * gaps compressed a thousandfold. Close it with `sim.close()`.
 */
export function startTestSimulator(opts: SimulatorOptions = {}): Promise<Simulator> {
  return startSimulator({ port: 0, host: '127.0.0.1', timeScale: 0.001, ...opts });
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
