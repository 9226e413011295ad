// Before `npm test` (its `pretest`) and the fault suite: the programs the tests drive as
// real parts must be on PATH, since a test that cannot find its program fails rather
// than skips. On Debian as root the missing packages are installed here, once and
// quietly; anywhere else this stops at once with one line naming what to install.
// Postgres and Redis themselves are the machine's (they run before the tests do).
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/** The Debian package of each program the tests run, by the program's name. */
const FROM_DEBIAN = [
  // Headless, driven by playwright-core (test/support/browser.ts).
  ['chromium', 'chromium'],
  // promtool checks the alert rules; a Prometheus server scrapes feedsync (test/monitoring/).
  ['promtool', 'prometheus'],
  ['prometheus', 'prometheus'],
  // A transaction pooler in front of the shared Postgres (test/faults/support/pgbouncer.ts).
  ['pgbouncer', 'pgbouncer'],
  // Private Redis servers the tests stop and restart (test/support/processes.ts).
  ['redis-server', 'redis-server'],
  // A network namespace where nothing listens, for the demo's own Postgres (test/support/netns.ts).
  ['ip', 'iproute2'],
];
/** Programs the tests run that Debian does not ship (its kubernetes-client is years older). */
const ELSEWHERE = ['kubectl'];
/** apt-get's own: an install of a cold cache and a slow mirror stays well inside it. */
const INSTALL_DEADLINE_MS = 15 * 60_000;
/** What is printed of apt-get's output when it fails: its last lines say why. */
const OUTPUT_TAIL_BYTES = 4096;

const say = (line) => process.stderr.write(`test prerequisites: ${line}\n`);

function onPath(program) {
  for (const dir of (process.env.PATH ?? '').split(delimiter).filter(Boolean)) {
    try {
      accessSync(join(dir, program), constants.X_OK);
      return true;
    } catch {
      // not in this directory
    }
  }
  return false;
}

function missingPackages() {
  return [...new Set(FROM_DEBIAN.filter(([program]) => !onPath(program)).map(([, pkg]) => pkg))];
}

/** Runs apt-get quietly; its output is shown only when it fails. */
function aptGet(args) {
  const run = spawnSync('apt-get', args, {
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    encoding: 'utf8',
    timeout: INSTALL_DEADLINE_MS,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (run.status === 0) return;
  const output = `${run.stdout ?? ''}${run.stderr ?? ''}`.slice(-OUTPUT_TAIL_BYTES);
  process.stderr.write(output);
  const why = run.error ? run.error.message : run.signal ? `killed by ${run.signal}` : `exit ${run.status}`;
  say(`apt-get ${args.join(' ')} failed (${why})`);
  process.exit(1);
}

const absent = ELSEWHERE.filter((program) => !onPath(program));
if (absent.length > 0) {
  say(
    `${absent.join(', ')} is not on PATH and is not a Debian package: install it, then run the tests again`,
  );
  process.exit(1);
}
const missing = missingPackages();
if (missing.length > 0) {
  const debianRoot = existsSync('/etc/debian_version') && process.getuid?.() === 0 && onPath('apt-get');
  if (!debianRoot) {
    say(`install ${missing.join(' ')} (the Debian packages' names), then run the tests again`);
    process.exit(1);
  }
  say(`installing ${missing.join(' ')} with apt-get, once: the tests drive them`);
  aptGet(['update', '-qq']);
  aptGet(['install', '-y', '-qq', ...missing]);
  const still = missingPackages();
  if (still.length > 0) {
    say(`apt-get installed ${still.join(' ')}, but their programs are still not on PATH`);
    process.exit(1);
  }
}
