import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { testEnv } from '../support/config.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { runNode } from '../support/processes.js';
import { deletePrefix, uniquePrefix } from '../support/redis.js';
import { useSimulator } from '../support/simulator.js';

const schema = uniqueSchema('embedding');
const prefix = uniquePrefix('embedding');
const sim = useSimulator({ backlog: 5 });

/** The README's embedding example, as a reader would copy it. */
function readmeExample(): string {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const block = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)]
    .map((m) => m[1]!)
    .find((code) => code.includes('createSync(loadConfig())'));
  if (!block) throw new Error('README.md has no createSync example');
  return block;
}

beforeAll(async () => {
  const store = createStore({ url: TEST_DATABASE_URL, schema });
  try {
    await migrate(store);
  } finally {
    await store.close();
  }
});
afterAll(async () => {
  await dropSchema(schema);
  await deletePrefix(prefix);
});

describe('createSync for embedding', () => {
  it("runs the README's example unchanged: createSync(config) with no options", async () => {
    // `feedsync` resolves to this package itself (its own name and exports), as in an application.
    const result = await runNode(['--input-type=module', '-e', readmeExample()], {
      ...testEnv({ schema, prefix, baseUrl: sim().baseUrl }),
    });
    expect(result.stderr).not.toMatch(/TypeError/);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('caught-up: 5 events stored');
  });
});
