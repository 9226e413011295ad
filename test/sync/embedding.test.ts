import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { testEnv } from '../support/config.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { killChildren, runNode, spawnNode, waitFor } from '../support/processes.js';
import { dropQueues, queuePrefix } from '../support/queues.js';
import { useSimulator } from '../support/simulator.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const schema = uniqueSchema('embedding');
const prefix = await queuePrefix('embedding');
const dir = mkdtempSync(join(tmpdir(), 'feedsync-embedding-'));
const OTHER_KEY = `acct_test_embedding${Math.random().toString(36).slice(2, 12)}`;
const sim = useSimulator({ backlog: 5 });

/** An example of docs/EMBEDDING.md, as a reader would copy it: the ```ts block that contains `marker`. */
function readmeExample(marker: string): string {
  const readme = readFileSync(join(ROOT, 'docs', 'EMBEDDING.md'), 'utf8');
  const block = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)]
    .map((m) => m[1]!)
    .find((c) => c.includes(marker));
  if (!block) throw new Error(`docs/EMBEDDING.md has no example with ${marker}`);
  return block;
}

/**
 * The type errors of `code` as a module at the project's root, under its tsconfig:
 * `feedsync` resolves to the package itself (dist/index.d.ts), as in an application.
 */
function typeErrors(code: string): string[] {
  const file = join(ROOT, 'readme-example.ts');
  const config = ts.readConfigFile(join(ROOT, 'tsconfig.json'), ts.sys.readFile);
  const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT);
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, language, ...rest) =>
    name === file ? ts.createSourceFile(name, code, language) : getSourceFile(name, language, ...rest);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => name === file || fileExists(name);
  const program = ts.createProgram([file], { ...options, noEmit: true }, host);
  return ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
}

beforeAll(async () => {
  sim().account(OTHER_KEY).setBacklog(3);
  const store = createStore({ url: TEST_DATABASE_URL, schema });
  try {
    await migrate(store);
  } finally {
    await store.close();
  }
});
afterAll(async () => {
  await killChildren();
  await dropSchema(schema);
  await dropQueues(prefix);
  rmSync(dir, { recursive: true, force: true });
});

describe('the embedding examples of docs/EMBEDDING.md', () => {
  it('type-check against the exports of the built package', () => {
    for (const marker of ['createSync(loadConfig())', 'runWorker(loadConfig()']) {
      expect(typeErrors(readmeExample(marker)), marker).toEqual([]);
    }
  }, 60_000);

  it('createSync(config) with no options runs unchanged', async () => {
    // `feedsync` resolves to this package itself (its own name and exports), as in an application.
    const result = await runNode(
      ['--input-type=module', '-e', readmeExample('createSync(loadConfig())')],
      {
        ...testEnv({ schema, prefix, baseUrl: sim().baseUrl }),
      },
      50_000,
    );
    expect(result.stderr).not.toMatch(/TypeError/);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('caught-up: 5 events stored');
  }, 60_000);

  it('runWorker watches every source of a sources file until SIGTERM, then returns', async () => {
    const file = join(dir, 'sources.json');
    const base = sim().baseUrl;
    const sources = [
      { source: 'acct-default', base_url: base },
      { source: 'acct-other', base_url: base, api_key_env: 'OTHER_KEY' },
    ];
    writeFileSync(file, JSON.stringify({ sources }));
    const child = spawnNode(['--input-type=module', '-e', readmeExample('runWorker(loadConfig()')], {
      ...testEnv({ schema, prefix }, { FEED_SOURCES_FILE: file, OTHER_KEY }),
    });
    await waitFor(
      () =>
        child.stdout().includes('acct-default: 5 events stored') &&
        child.stdout().includes('acct-other: 3 events stored'),
      { timeoutMs: 45_000, what: 'a turn of each source' },
    );
    child.signal('SIGTERM');
    const result = await child.waitExit(20_000);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toBe('');
  }, 90_000);
});
