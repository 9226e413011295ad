import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

// scripts/test-prerequisites.mjs, `npm test`'s first step, run as a child with a PATH
// of stand-in programs: an apt-get that records what it was asked and "installs" by
// adding the packages' programs. This machine is Debian and the tests run as root, so
// "elsewhere" is the same script run as an unprivileged user.
const SCRIPT = new URL('../../scripts/test-prerequisites.mjs', import.meta.url).pathname;
const PROGRAMS = ['chromium', 'promtool', 'prometheus', 'pgbouncer', 'redis-server', 'ip', 'kubectl'];
const NOBODY = 65534;

let dir = '';
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function program(name: string, body = 'exit 0'): void {
  writeFileSync(join(dir, name), `#!/bin/sh\n${body}\n`);
  chmodSync(join(dir, name), 0o755);
}

/** A PATH holding `present` and an apt-get that installs by adding programs (or fails, `aptFails`). */
function machine(present: readonly string[], opts: { aptFails?: boolean } = {}): void {
  dir = mkdtempSync(join(tmpdir(), 'feedsync-prereq-'));
  chmodSync(dir, 0o777);
  for (const name of present) program(name);
  const add = (name: string) =>
    `/usr/bin/printf '#!/bin/sh\\n' > ${dir}/${name}; /bin/chmod 755 ${dir}/${name}`;
  program(
    'apt-get',
    [
      `echo "$DEBIAN_FRONTEND $*" >> ${dir}/apt.log`,
      opts.aptFails ? 'echo "E: Unable to locate package chromium"; exit 100' : '',
      'for p in "$@"; do case "$p" in',
      `  chromium) ${add('chromium')};;`,
      `  prometheus) ${add('promtool')}; ${add('prometheus')};;`,
      `  pgbouncer) ${add('pgbouncer')};;`,
      'esac; done',
    ].join('\n'),
  );
}

/**
 * Runs the script; as `uid`, a copy of it in the machine's folder, from there: that user
 * may not enter the clone (one in root's home folder).
 */
function run(uid?: number): { code: number | null; stderr: string; stdout: string } {
  const script = uid === undefined ? SCRIPT : join(dir, 'test-prerequisites.mjs');
  if (uid !== undefined) copyFileSync(SCRIPT, script);
  const child = spawnSync(process.execPath, [script], {
    env: { PATH: dir },
    cwd: dir,
    encoding: 'utf8',
    timeout: 30_000,
    ...(uid === undefined ? {} : { uid }),
  });
  return { code: child.status, stderr: child.stderr, stdout: child.stdout };
}

const aptCalls = () => (existsSync(join(dir, 'apt.log')) ? readFileSync(join(dir, 'apt.log'), 'utf8') : '');

describe('scripts/test-prerequisites.mjs', () => {
  it('says nothing and exits 0 when every program is there', () => {
    machine(PROGRAMS);
    expect(run()).toEqual({ code: 0, stderr: '', stdout: '' });
    expect(aptCalls()).toBe('');
  });

  it('on Debian as root installs the missing packages quietly, saying so in one line, and only once', () => {
    machine(['redis-server', 'ip', 'kubectl']);
    const first = run();
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toBe(
      'test prerequisites: installing chromium prometheus pgbouncer with apt-get, once: the tests drive them\n',
    );
    expect(first.stdout).toBe('');
    expect(aptCalls()).toBe(
      'noninteractive update -qq\nnoninteractive install -y -qq chromium prometheus pgbouncer\n',
    );
    expect(run()).toEqual({ code: 0, stderr: '', stdout: '' });
    expect(aptCalls().split('\n').filter(Boolean)).toHaveLength(2);
  });

  it('elsewhere stops at once with one line naming what to install, and installs nothing', () => {
    machine(['redis-server', 'ip', 'kubectl', 'promtool', 'prometheus']);
    const { code, stderr } = run(NOBODY);
    expect(code).toBe(1);
    expect(stderr).toBe(
      "test prerequisites: install chromium pgbouncer (the Debian packages' names), then run the tests again\n",
    );
    expect(aptCalls()).toBe('');
  });

  it('stops before installing anything when a program Debian does not ship is missing', () => {
    machine(['redis-server']);
    const { code, stderr } = run();
    expect(code).toBe(1);
    expect(stderr).toBe(
      'test prerequisites: kubectl is not on PATH and is not a Debian package: install it, then run the tests again\n',
    );
    expect(aptCalls()).toBe('');
  });

  it("shows apt-get's output and exits 1 when the install fails", () => {
    machine(['redis-server', 'ip', 'kubectl'], { aptFails: true });
    const { code, stderr } = run();
    expect(code).toBe(1);
    expect(stderr).toContain('E: Unable to locate package chromium');
    expect(stderr).toMatch(/test prerequisites: apt-get update -qq failed \(exit 100\)\n$/);
  });
});
