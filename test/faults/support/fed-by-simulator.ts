import type { Simulator } from '../../../src/simulator/index.js';
import { startTestSimulator, TEST_API_KEY } from '../../support/simulator.js';
import { type Fate, fateOf } from './fate.js';
import type { Sandbox } from './sandbox.js';
import { readWholeFeed } from './served.js';

/** Simulators started by one test file, each with a backlog and a latency, closed together. */
export function simulators(): {
  start(backlog: number, latencyMs?: number): Promise<Simulator>;
  closeAll(): Promise<void>;
} {
  const started: Simulator[] = [];
  return {
    async start(backlog, latencyMs = 0) {
      const sim = await startTestSimulator({ backlog, faults: { latencyMs } });
      started.push(sim);
      return sim;
    },
    async closeAll() {
      for (const sim of started.splice(0)) await sim.close();
    },
  };
}

/** The fate of everything the simulator served, in a sandbox's store and queues. */
export async function fateOfFeed(box: Sandbox, sim: Simulator): Promise<Fate> {
  const served = await readWholeFeed(sim.baseUrl, TEST_API_KEY);
  return fateOf(box, served);
}
