import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { freePort } from './redis-server.mjs';

/** The newest Debian Postgres's binaries (postgresql-NN: initdb, pg_ctl, pg_stat_statements). */
function debianBin() {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => /^\d+$/.test(v)) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (!newest) throw new Error(`no Postgres binaries under ${root}: install the Debian package postgresql`);
  return join(root, newest, 'bin');
}

/**
 * A Postgres of the bench's own (Debian's binaries, run as the postgres user when the
 * bench runs as root), in a temporary folder on a free loopback port, with
 * pg_stat_statements loaded: nothing else talks to it, so what it counts is what the
 * bench ran. stop() stops it and removes the folder.
 */
export async function startOwnPostgres() {
  const bin = debianBin();
  const dir = mkdtempSync(join(tmpdir(), 'feedsync-bench-pg-'));
  const asRoot = userInfo().uid === 0;
  const run = (program, args) =>
    execFileSync(asRoot ? 'runuser' : join(bin, program), [
      ...(asRoot ? ['-u', 'postgres', '--', join(bin, program)] : []),
      ...args,
    ]);
  if (asRoot) {
    const id = (flag) => Number(execFileSync('id', [flag, 'postgres']).toString().trim());
    chownSync(dir, id('-u'), id('-g'));
  }
  const data = join(dir, 'data');
  const port = await freePort();
  run('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync']);
  const settings = [
    `-p ${port}`,
    '-c listen_addresses=127.0.0.1',
    `-c unix_socket_directories=${dir}`,
    '-c shared_preload_libraries=pg_stat_statements',
    '-c pg_stat_statements.track=top',
    '-c fsync=off',
  ].join(' ');
  run('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-o', settings, '-w', 'start']);
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async stop() {
      try {
        run('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
