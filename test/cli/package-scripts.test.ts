import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as {
  version: string;
  bin: Record<string, string>;
  scripts: Record<string, string>;
  allowScripts?: Record<string, boolean>;
};
const lock = JSON.parse(readFileSync(`${root}package-lock.json`, 'utf8')) as {
  packages: Record<string, { bin?: Record<string, string>; hasInstallScript?: boolean }>;
};

describe('install scripts', () => {
  // npm 11 skips a dependency's install scripts unless package.json's allowScripts names
  // it, and warns on every `npm ci` about each one it does not name. None is needed here
  // (esbuild and msgpackr-extract come with prebuilt binaries as optional packages,
  // protobufjs's script only checks versions), so each is denied, and named.
  it('names every package of the lock that has an install script in allowScripts', () => {
    const withScripts = Object.entries(lock.packages)
      .filter(([, entry]) => entry.hasInstallScript)
      .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length))
      .sort();
    expect(withScripts.length).toBeGreaterThan(0);
    expect(Object.keys(pkg.allowScripts ?? {}).sort()).toEqual(withScripts);
  });
});

describe('package scripts', () => {
  // The demo script once named a file the build had stopped writing, and only the
  // README's own command would have shown it.
  it('run the command through the bin that package.json names, a file the build writes', () => {
    const bin = pkg.bin.feedsync;
    expect(bin).toBeDefined();
    expect(existsSync(`${root}${bin}`), `${bin} after npm run build`).toBe(true);
    for (const [name, script] of Object.entries(pkg.scripts)) {
      for (const file of script.match(/\bdist\/\S+\.js\b/g) ?? []) {
        expect(file, `script "${name}"`).toBe(bin);
      }
    }
    expect(pkg.scripts.demo).toBe(`node ${bin} demo`);
  });

  // Node's documentation calls V8 flags changed after start unpredictable: the bin gives
  // them to node on its first line, where they apply before any code runs.
  it("start node with the V8 flags the CLI relies on, from the bin's first line", () => {
    const first = readFileSync(`${root}${pkg.bin.feedsync}`, 'utf8').split('\n', 1)[0];
    expect(first).toBe('#!/usr/bin/env -S node --liftoff-only --heap-growing-percent=50');
    // A preload that tells which flags node started with, before the CLI's own code runs.
    const dir = mkdtempSync(join(tmpdir(), 'feedsync-flags-'));
    const probe = join(dir, 'flags.cjs');
    writeFileSync(probe, 'process.stderr.write(JSON.stringify(process.execArgv) + "\\n");');
    try {
      const run = spawnSync(`${root}${pkg.bin.feedsync}`, ['--version'], {
        encoding: 'utf8',
        env: { PATH: process.env.PATH ?? '', NODE_OPTIONS: `--require ${probe}` },
      });
      expect(run.status, run.stderr).toBe(0);
      expect(JSON.parse(run.stderr.split('\n')[0] ?? '')).toEqual([
        '--liftoff-only',
        '--heap-growing-percent=50',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('agree with the lockfile, so npm ci installs the bin it names', () => {
    expect(lock.packages['']?.bin).toEqual(pkg.bin);
  });
});

describe('npm ci in a clone', () => {
  // `npx feedsync …` right after `npm ci` once printed "feedsync: not found": nothing had
  // built dist/. npm ci runs the root package's `prepare`, which builds where the sources
  // and the dev dependencies are, and does nothing where they are not (the image's stages,
  // .ci/image-recipe: package files first, sources later or never), nor when `npx feedsync`
  // installs the project into npx's cache (npm_command=exec): that rebuilt the clone's own
  // dist/ under the commands running from it.
  function folderWith(parts: readonly string[]): string {
    const dir = mkdtempSync(join(tmpdir(), 'feedsync-prepare-'));
    for (const part of parts) cpSync(join(root, part), join(dir, part), { recursive: true });
    return dir;
  }

  it('builds the CLI, so that npx feedsync runs', () => {
    const dir = folderWith([
      'package.json',
      'package-lock.json',
      'tsconfig.json',
      'tsconfig.build.json',
      'src',
      'scripts',
      'migrations',
    ]);
    symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
    try {
      const prepare = spawnSync('npm', ['run', 'prepare', '--silent'], {
        cwd: dir,
        encoding: 'utf8',
        timeout: 240_000,
      });
      expect(prepare.status, prepare.stderr).toBe(0);
      const run = spawnSync('npx', ['feedsync', '--version'], {
        cwd: dir,
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(run.stdout.trim(), run.stderr).toBe(pkg.version);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);

  it('does nothing where there are no sources to build (the image)', () => {
    const dir = folderWith(['package.json', 'package-lock.json']);
    try {
      const prepare = spawnSync('npm', ['run', 'prepare', '--silent'], {
        cwd: dir,
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(prepare.status, prepare.stderr).toBe(0);
      expect(existsSync(join(dir, 'dist'))).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
