import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  assignments,
  dockerignorePatterns,
  execForm,
  type Instruction,
  isIgnored,
  parseDockerfile,
} from './dockerfile.js';
import { ROOT } from './manifests.js';

const stages = parseDockerfile(readFileSync(`${ROOT}Dockerfile`, 'utf8'));
const ignore = dockerignorePatterns(readFileSync(`${ROOT}.dockerignore`, 'utf8'));
const recipe = readFileSync(`${ROOT}.ci/image-recipe`, 'utf8');
const runtime = stages.at(-1)!;
const build = stages[0]!;

const of = (instructions: Instruction[], keyword: string) =>
  instructions.filter((i) => i.keyword === keyword);
const lastOf = (keyword: string) => of(runtime.instructions, keyword).at(-1);
/** COPY sources and flags: `--from=x a b dest` gives { from: 'x', sources: ['a', 'b'] }. */
const copies = (instructions: Instruction[]) =>
  of(instructions, 'COPY').map((i) => {
    const words = i.args.split(/\s+/);
    const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length) ?? null;
    const sources = words.filter((w) => !w.startsWith('--')).slice(0, -1);
    return { from, sources, line: i.line };
  });

describe('Dockerfile', () => {
  it('builds in one stage and runs from another', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(build.name).toBeTruthy();
    expect(runtime.image).not.toBe(build.name);
  });

  it('starts every stage from an LTS Node image (22 or 24)', () => {
    for (const stage of stages) {
      expect(stage.image).toMatch(
        /^node:(22|24)(\.\d+){0,2}(-(bookworm|trixie|alpine[\d.]*))?(-slim)?(@sha256:[0-9a-f]{64})?$/,
      );
    }
  });

  it('installs dev dependencies and builds in the build stage', () => {
    const runs = of(build.instructions, 'RUN').map((i) => i.args);
    const ci = runs.findIndex((r) => /\bnpm ci\b/.test(r) && !/--omit=dev/.test(r));
    const compile = runs.findIndex((r) => r.includes('npm run build'));
    expect(ci).toBeGreaterThanOrEqual(0);
    expect(compile).toBeGreaterThan(ci);
  });

  it('installs production dependencies only in the runtime stage, and copies no source', () => {
    const runs = of(runtime.instructions, 'RUN').map((i) => i.args);
    expect(runs.some((r) => /\bnpm ci\b.*--omit=dev/.test(r))).toBe(true);
    const fromContext = copies(runtime.instructions).filter((c) => c.from === null);
    expect(fromContext.flatMap((c) => c.sources).sort()).toEqual([
      'migrations',
      'package-lock.json',
      'package.json',
    ]);
    const fromBuild = copies(runtime.instructions).filter((c) => c.from === build.name);
    expect(fromBuild.flatMap((c) => c.sources)).toEqual(['/app/dist']);
    expect(of(runtime.instructions, 'ENV').flatMap((i) => assignments(i.args))).toContainEqual([
      'NODE_ENV',
      'production',
    ]);
  });

  it('runs as a numeric non-root user', () => {
    const user = lastOf('USER');
    expect(user?.args).toMatch(/^\d+(:\d+)?$/);
    expect(Number(user?.args.split(':')[0])).toBeGreaterThan(0);
    // Nothing after USER switches back or needs root.
    expect(runtime.instructions.filter((i) => i.line > (user?.line ?? 0) && i.keyword === 'RUN')).toEqual([]);
  });

  it('runs node dist/bin/feedsync.js in exec form, so SIGTERM reaches node, with one sync run as default', () => {
    expect(execForm(lastOf('ENTRYPOINT')?.args ?? '')).toEqual([
      'node',
      '--max-semi-space-size=8',
      '--liftoff-only',
      '--heap-growing-percent=50',
      'dist/bin/feedsync.js',
    ]);
    expect(execForm(lastOf('CMD')?.args ?? '')).toEqual(['sync', '--once']);
  });

  it('bakes in no secret', () => {
    for (const stage of stages) {
      for (const i of [...of(stage.instructions, 'ENV'), ...of(stage.instructions, 'ARG')]) {
        for (const [key, value] of assignments(i.args)) {
          expect(key, `line ${i.line}`).not.toMatch(
            /KEY|SECRET|PASSWORD|TOKEN|CREDENTIAL|DATABASE_URL|REDIS_URL/i,
          );
          expect(value, `line ${i.line}`).not.toMatch(/:\/\/[^/@\s]*:[^/@\s]*@/);
        }
      }
      for (const c of copies(stage.instructions)) {
        for (const source of c.sources)
          expect(source, `line ${c.line}`).not.toMatch(/\.env|\.npmrc|\.pem$|\.key$/);
      }
    }
  });

  it('copies only files that exist and that .dockerignore lets through', () => {
    for (const stage of stages) {
      for (const c of copies(stage.instructions).filter((c) => c.from === null)) {
        for (const source of c.sources) {
          expect(existsSync(`${ROOT}${source}`), source).toBe(true);
          expect(isIgnored(ignore, source), source).toBe(false);
        }
      }
    }
  });
});

describe('.dockerignore', () => {
  it.each(['node_modules', 'dist', '.git', 'test', '.env', '.env.local', 'coverage'])(
    'leaves out %s',
    (path) => {
      expect(isIgnored(ignore, path)).toBe(true);
      expect(isIgnored(ignore, `${path}/inner/file`)).toBe(true);
    },
  );

  it('matches the way Docker does', () => {
    expect(isIgnored(['**/*.log'], 'a/b/c.log')).toBe(true);
    expect(isIgnored(['*.md', '!README.md'], 'README.md')).toBe(false);
    expect(isIgnored(['test'], 'tests')).toBe(false);
  });
});

describe('.ci/image-recipe', () => {
  it('repeats the runtime stage: the same copies, a production install, the CLI starting', () => {
    const copied = [...recipe.matchAll(/^cp (?:-R )?(.+) "\$work"\/$/gm)].flatMap((m) => m[1]!.split(/\s+/));
    expect(copied.sort()).toEqual(['dist', 'migrations', 'package-lock.json', 'package.json']);
    expect(recipe).toMatch(/npm ci --omit=dev/);
    expect(recipe).toMatch(/^node dist\/bin\/feedsync\.js --help/m);
  });
});
