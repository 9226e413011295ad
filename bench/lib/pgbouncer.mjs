import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

const freePort = () =>
  new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });

/**
 * Debian's pgbouncer in transaction mode in front of `databaseUrl`, for a bench that
 * counts the statements its workers send (SHOW STATS). As the fault suite's
 * (test/faults/support/pgbouncer.ts): it refuses to run as root, so it runs as postgres.
 */
export async function startPgBouncer(databaseUrl, { poolSize = 20 } = {}) {
  const target = new URL(databaseUrl);
  const database = target.pathname.slice(1) || 'postgres';
  const port = await freePort();
  const dir = mkdtempSync('/tmp/feedsync-bench-pgbouncer-');
  const ini = join(dir, 'pgbouncer.ini');
  const pidFile = join(dir, 'pgbouncer.pid');
  writeFileSync(join(dir, 'userlist.txt'), '"postgres" ""\n');
  writeFileSync(
    ini,
    [
      '[databases]',
      `${database} = host=${target.hostname} port=${target.port || 5432} dbname=${database}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      'admin_users = postgres',
      `default_pool_size = ${poolSize}`,
      'max_client_conn = 500',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      `pidfile = ${pidFile}`,
      '',
    ].join('\n'),
  );
  chmodSync(dir, 0o755);
  const asRoot = userInfo().uid === 0;
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    for (const f of ['', 'pgbouncer.ini', 'userlist.txt']) chownSync(join(dir, f), uid, gid);
  }
  execFileSync(asRoot ? 'runuser' : 'pgbouncer', [
    ...(asRoot ? ['-u', 'postgres', '--', 'pgbouncer'] : []),
    '-d',
    ini,
  ]);
  let pid = 0;
  for (let i = 0; i < 100 && !pid; i++) {
    try {
      pid = Number(readFileSync(pidFile, 'utf8').trim());
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  if (!pid) throw new Error('pgbouncer did not start');
  return {
    url: `postgres://postgres@127.0.0.1:${port}/${database}`,
    /** Statements sent to the database through it so far (SHOW STATS, total_query_count). */
    async queryCount() {
      // The admin console speaks the simple query protocol only: a Client with no parameters.
      const admin = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/pgbouncer` });
      await admin.connect();
      try {
        const { rows } = await admin.query('SHOW STATS');
        return Number(rows.find((r) => r.database === database)?.total_query_count ?? 0);
      } finally {
        await admin.end();
      }
    },
    stop() {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        // Already gone.
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
