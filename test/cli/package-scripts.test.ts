import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as {
  bin: Record<string, string>;
  scripts: Record<string, string>;
};
const lock = JSON.parse(readFileSync(`${root}package-lock.json`, 'utf8')) as {
  packages: Record<string, { bin?: Record<string, string> }>;
};

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

  it('agree with the lockfile, so npm ci installs the bin it names', () => {
    expect(lock.packages['']?.bin).toEqual(pkg.bin);
  });
});
