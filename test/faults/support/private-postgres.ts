import { execFile } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../support/processes.js';

const run = promisify(execFile);

/** A Postgres cluster of the test's own, on its own port, that it can stop and start. */
export interface PrivatePostgres {
  readonly port: number;
  /** `postgres://postgres@127.0.0.1:<port>/postgres` */
  readonly url: string;
  start(): Promise<void>;
  /** `fast` closes the sessions and checkpoints; `immediate` is a crash of the server. */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  /** Stops it and removes its files. */
  dispose(): Promise<void>;
}

/** Where initdb and pg_ctl live: `pg_config --bindir`, else the Debian path. */
async function binDir(): Promise<string> {
  try {
    return (await run('pg_config', ['--bindir'])).stdout.trim();
  } catch {
    return '/usr/lib/postgresql/15/bin';
  }
}

/**
 * initdb and pg_ctl refuse to run as root: as root they run as the `postgres`
 * user (through runuser), which then owns the directory.
 */
async function asOwner(bin: string, args: string[], dir: string): Promise<void> {
  if (process.getuid?.() === 0) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
    chownSync(dir, Number(stdout.trim()), gid);
    await run('runuser', ['-u', 'postgres', '--', bin, ...args], { timeout: 60_000 });
  } else {
    await run(bin, args, { timeout: 60_000 });
  }
}

/** initdb in a temporary directory and start the server on a free loopback port. */
export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = await binDir();
  const dir = mkdtempSync(join(tmpdir(), 'feedsync-pg-'));
  const data = join(dir, 'data');
  const port = await freePort();
  await asOwner(
    join(bin, 'initdb'),
    ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8'],
    dir,
  );
  // No durability needed: the cluster lives for one test file. Sockets go in `dir`, not /var/run.
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off`;
  let running = false;
  const pgCtl = (args: string[]) => asOwner(join(bin, 'pg_ctl'), ['-D', data, ...args], dir);
  const pg: PrivatePostgres = {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async start() {
      await pgCtl(['-o', options, '-l', join(dir, 'server.log'), '-w', '-t', '60', 'start']);
      running = true;
    },
    async stop(mode = 'fast') {
      if (!running) return;
      await pgCtl(['-m', mode, '-w', '-t', '60', 'stop']);
      running = false;
    },
    async dispose() {
      await pg.stop('immediate').catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await pg.start();
  return pg;
}
