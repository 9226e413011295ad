import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_DEFAULTS } from '../../src/config/config-defaults.js';
import { execForm, parseDockerfile } from './dockerfile.js';
import { OVERLAYS, ROOT, render } from './manifests.js';

/**
 * Where a document states a value the code or the manifests hold, the two agree: the
 * variables table of docs/DEPLOYMENT.md against CONFIG_DEFAULTS (and the README's short
 * table against it), DEPLOYMENT's ENTRYPOINT against the Dockerfile, its minimum
 * Kubernetes version against the fields the manifests use.
 */
const readme = readFileSync(`${ROOT}README.md`, 'utf8');
const deployment = readFileSync(`${ROOT}docs/DEPLOYMENT.md`, 'utf8');
/** DEPLOYMENT's "Configuration" section, where its variables table is (other sections have tables of their own). */
const configuration = deployment.split('\n## Configuration\n')[1]?.split('\n## ')[0] ?? '';

/** A document's variables table: name to the text of its default cell. */
function defaultCells(doc: string): Map<string, string> {
  const rows = new Map<string, string>();
  for (const line of doc.split('\n')) {
    const cells = /^\| `([A-Z][A-Z0-9_]+)` \| ([^|]*) \|/.exec(line);
    if (cells) rows.set(cells[1]!, cells[2]!.trim());
  }
  return rows;
}

describe("docs/DEPLOYMENT.md's variables table", () => {
  const table = defaultCells(configuration);

  it('gives each default of src/config/config-defaults.ts as the code holds it', () => {
    expect(table.size).toBeGreaterThan(30);
    for (const [name, value] of Object.entries(CONFIG_DEFAULTS)) {
      const cell = table.get(name);
      if (cell === undefined) {
        // A variable without a row of its own is given with its default in another row's text.
        expect(configuration, name).toContain(`\`${name}\` (default \`${value}\`)`);
      } else {
        expect(cell, name).toBe(`\`${value}\``);
      }
    }
  });

  it('states no default in backticks for a variable whose default is not in CONFIG_DEFAULTS', () => {
    const known = new Set(Object.keys(CONFIG_DEFAULTS));
    const stated = [...table].filter(([name, cell]) => /^`[^`]+`$/.test(cell) && !known.has(name));
    expect(stated).toEqual([]);
  });
});

describe("the README's variables table", () => {
  it("is a short part of DEPLOYMENT's, each default as it gives it, and links it", () => {
    const full = defaultCells(configuration);
    const short = defaultCells(readme);
    expect(short.size).toBeGreaterThan(0);
    expect(short.size).toBeLessThanOrEqual(10);
    for (const [name, cell] of short) expect(cell, name).toBe(full.get(name));
    expect(readme).toContain('(docs/DEPLOYMENT.md#configuration)');
  });
});

describe('docs/DEPLOYMENT.md', () => {
  it("quotes the Dockerfile's ENTRYPOINT as it is", () => {
    const runtime = parseDockerfile(readFileSync(`${ROOT}Dockerfile`, 'utf8')).at(-1)!;
    const entrypoint = runtime.instructions.filter((i) => i.keyword === 'ENTRYPOINT').at(-1)!;
    const quoted = [...deployment.matchAll(/`ENTRYPOINT (\[[^\]]*\])`/g)].map((m) => m[1]!);
    expect(quoted.length).toBeGreaterThan(0);
    for (const q of quoted) expect(JSON.parse(q)).toEqual(execForm(entrypoint.args));
  });

  it('states the Kubernetes version where every field the manifests use takes effect', () => {
    // The release from which each field is on by default (GA, or beta enabled by default).
    const since: Record<string, number> = { timeZone: 27, podFailurePolicy: 26, podReplacementPolicy: 29 };
    const text = JSON.stringify(OVERLAYS.flatMap((o) => render(o)));
    const used = Object.keys(since).filter((field) => text.includes(`"${field}"`));
    expect(used).toContain('podReplacementPolicy');
    const minor = Math.max(...used.map((field) => since[field]!));
    expect(deployment).toContain(`**Kubernetes 1.${minor} or later**`);
  });

  it('creates the namespace before anything is applied, and applies only after "Before you apply"', () => {
    const before = deployment.indexOf('### Before you apply');
    const firstApply = deployment.indexOf('kubectl apply -k');
    const create = deployment.indexOf('kubectl create namespace feedsync');
    expect(before).toBeGreaterThan(0);
    expect(create).toBeGreaterThan(before);
    expect(firstApply).toBeGreaterThan(create);
  });
});
