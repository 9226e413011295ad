// `npm run build`: the library into dist/ (tsc) and the CLI bundled into dist/bin/
// (bundle.mjs), both written into dist.next/ first and swapped in at the end, so that a
// process running the built CLI while a build goes on (a test beside a rebuild, a
// second terminal) never finds dist/ gone or half written.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, renameSync, rmSync } from 'node:fs';

const root = new URL('../', import.meta.url).pathname;
const next = `${root}dist.next`;
const old = `${root}dist.old`;

function run(args) {
  const { status } = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
  if (status !== 0) process.exit(status ?? 1);
}

rmSync(next, { recursive: true, force: true });
run([`${root}node_modules/typescript/bin/tsc`, '-p', 'tsconfig.build.json', '--outDir', next]);
cpSync(`${root}src/simulator/dashboard`, `${next}/simulator/dashboard`, { recursive: true });
run([`${root}scripts/bundle.mjs`, `${next}/bin/`]);
rmSync(old, { recursive: true, force: true });
if (existsSync(`${root}dist`)) renameSync(`${root}dist`, old);
renameSync(next, `${root}dist`);
rmSync(old, { recursive: true, force: true });
