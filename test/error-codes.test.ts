import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';

const root = new URL('../', import.meta.url);

/** The codes of the ErrorCode union, read from its source. */
function unionCodes(): string[] {
  const text = readFileSync(new URL('src/error-codes.ts', root), 'utf8');
  return [...text.matchAll(/^\s*\|\s*'([A-Z_]+)'/gm)].map((m) => m[1] as string);
}

/** The codes docs/DESIGN.md's "Error codes" table lists, with their exit codes. */
function documented(): Map<string, string> {
  const text = readFileSync(new URL('docs/DESIGN.md', root), 'utf8');
  const section = text.split('### Error codes')[1]?.split('\n### ')[0] ?? '';
  const out = new Map<string, string>();
  for (const row of section.split('\n').filter((l) => /^\| `/.test(l))) {
    const [codes, exit] = row.split('|').slice(1, 3);
    for (const m of (codes ?? '').matchAll(/`([A-Z_]+)`/g)) out.set(m[1] as string, (exit ?? '').trim());
  }
  return out;
}

it('lists every error code in docs/DESIGN.md with its exit code, and nothing else', () => {
  const codes = unionCodes();
  const table = documented();
  expect(codes.length).toBeGreaterThan(30);
  expect([...table.keys()].sort()).toEqual([...codes].sort());
  for (const exit of table.values()) expect(['1', '2', '3', '5']).toContain(exit);
});
