import { afterAll, beforeAll } from 'vitest';
import type { Simulator } from '../../src/simulator/index.js';
import { testEnv } from '../support/config.js';
import { killChildren } from '../support/processes.js';
import { useSimulator } from '../support/simulator.js';
import { type Sandbox, useSandboxes } from '../sync/harness.js';

/**
 * The CLI run as a child against one simulator and one sandbox (schema and queue
 * prefix) for a whole test file, both made in beforeAll: `env` is the environment of a
 * run, with `extra` over it. Children still running are killed after the file.
 */
export function useCliSandbox(label: string): {
  sim: () => Simulator;
  box: () => Sandbox;
  env: (extra?: Record<string, string>) => Record<string, string>;
} {
  const sim = useSimulator();
  const sandbox = useSandboxes();
  afterAll(killChildren);
  let made: Sandbox | undefined;
  beforeAll(async () => {
    made = await sandbox(label);
  });
  const box = (): Sandbox => {
    if (!made) throw new Error('the sandbox is made in beforeAll');
    return made;
  };
  return {
    sim,
    box,
    env: (extra = {}) => ({
      PATH: process.env.PATH ?? '',
      ...testEnv({ schema: box().schema, prefix: box().prefix, baseUrl: sim().baseUrl }),
      ...extra,
    }),
  };
}
