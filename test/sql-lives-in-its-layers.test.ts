import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { expect, it } from 'vitest';

/**
 * SQL lives in two data layers only: src/store/ (feedsync's own schema) and
 * src/consumer/statements.ts (the inbox table a consumer keeps in the application's
 * database). Beside them, the queues in Postgres (src/queue/pg-*.ts, and doctor's check
 * of their connection) ask BullMQ's own schema and connection a few probes (a ping,
 * whether its ledger exists, the search_path, a LISTEN/NOTIFY round trip): BullMQ's
 * SQL does the rest. Anywhere else a statement is a layer nobody declared: this test finds
 * string literals that start like a statement, queries given literal text, and kysely's
 * builders, outside those two places.
 */
const SRC = new URL('../src/', import.meta.url).pathname;
const ALLOWED = [
  /^store\//,
  /^consumer\/statements\.ts$/,
  /^queue\/pg-[a-z-]+\.ts$/,
  /^doctor\/pg-queue-checks\.ts$/,
];

const SQL_SIGNS: readonly RegExp[] = [
  // A literal, in code, that starts as a statement does (not a quotation inside a message).
  /(^|[=(,:?+[]|return|=>)\s*[`'"]\s*(SELECT|INSERT\s+INTO|UPDATE\s+\S+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX|SCHEMA|UNIQUE)|ALTER\s+TABLE|DROP\s+(TABLE|SCHEMA|INDEX)|TRUNCATE|BEGIN|COMMIT|ROLLBACK|SET\s+LOCAL|WITH\s+\w+\s+AS)\b/,
  // A query given its text in place.
  /\.query\s*(<[^>]*>)?\(\s*[`'"]/,
  // kysely's raw SQL and builders.
  /\bsql\s*`/,
  /\.(selectFrom|insertInto|updateTable|deleteFrom|replaceInto)\s*\(/,
];

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return /\.ts$/.test(entry.name) ? [path] : [];
  });
}

it('SQL is written only in src/store/, src/consumer/statements.ts and the probes of the queues in Postgres', () => {
  const files = sources(SRC).map((path) => relative(SRC, path));
  expect(files.length).toBeGreaterThan(100);
  const found: string[] = [];
  for (const file of files.filter((f) => !ALLOWED.some((allowed) => allowed.test(f)))) {
    readFileSync(join(SRC, file), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (SQL_SIGNS.some((sign) => sign.test(line))) found.push(`src/${file}:${i + 1}: ${line.trim()}`);
      });
  }
  expect(found).toEqual([]);
});

it('finds a statement where one is written', () => {
  const lines = [
    "await db.query('SELECT 1');",
    'const q = `DELETE FROM t WHERE x`;',
    'await pool.query<{ n: number }>(`select count(*)`);',
    'db.selectFrom("events")',
  ];
  for (const line of lines)
    expect(
      SQL_SIGNS.some((sign) => sign.test(line)),
      line,
    ).toBe(true);
  expect(SQL_SIGNS.some((sign) => sign.test("out(`look around: psql -c 'SELECT * FROM x'`)"))).toBe(false);
});
