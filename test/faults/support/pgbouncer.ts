import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort, waitFor } from '../../support/processes.js';

/** A PgBouncer in transaction mode in front of the shared Postgres, on a free loopback port. */
export interface PgBouncer {
  /** DATABASE_URL through the pooler. */
  readonly url: string;
  /** The backend pids of its server connections now (SHOW SERVERS on its admin console). */
  serverPids(): Promise<number[]>;
  /** Statements its clients sent to the database so far (SHOW STATS, total_query_count). */
  queryCount(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * Starts Debian's pgbouncer (1.18: it does not track named prepared statements) with
 * `pool_mode = transaction`, a small pool, trust auth. It refuses to run as root, so
 * it runs as the postgres user, with its files in a temporary directory of its own.
 */
export async function startPgBouncer(
  target: {
    host: string;
    port: number;
    database: string;
  },
  opts: {
    /** Start-up parameters it drops without a word (`options`: a pooler that loses search_path); default none, refused. */
    ignoreStartupParameters?: string;
  } = {},
): Promise<PgBouncer> {
  const port = await freePort();
  const dir = mkdtempSync('/tmp/feedsync-pgbouncer-');
  const ini = join(dir, 'pgbouncer.ini');
  const pidFile = join(dir, 'pgbouncer.pid');
  writeFileSync(join(dir, 'userlist.txt'), '"postgres" ""\n');
  writeFileSync(
    ini,
    [
      '[databases]',
      `${target.database} = host=${target.host} port=${target.port} dbname=${target.database}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      ...(opts.ignoreStartupParameters
        ? [`ignore_startup_parameters = ${opts.ignoreStartupParameters}`]
        : []),
      'admin_users = postgres',
      // Fewer server connections than clients: transactions of different clients share them.
      'default_pool_size = 4',
      'max_client_conn = 200',
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
  const pid = await waitFor(
    () => {
      try {
        return Number(readFileSync(pidFile, 'utf8').trim()) || null;
      } catch {
        return null;
      }
    },
    { what: 'pgbouncer to write its pid', timeoutMs: 10_000 },
  );
  const url = `postgres://postgres@127.0.0.1:${port}/${target.database}`;
  // The admin console speaks the simple query protocol only: a Client with no parameters.
  const show = async <R extends pg.QueryResultRow>(what: string): Promise<R[]> => {
    const admin = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/pgbouncer` });
    await admin.connect();
    try {
      return (await admin.query<R>(`SHOW ${what}`)).rows;
    } finally {
      await admin.end();
    }
  };
  return {
    url,
    async serverPids() {
      const rows = await show<{ remote_pid: string }>('SERVERS');
      return rows.map((r) => Number(r.remote_pid)).filter((n) => n > 0);
    },
    async queryCount() {
      const rows = await show<{ database: string; total_query_count: string }>('STATS');
      return Number(rows.find((r) => r.database === target.database)?.total_query_count ?? 0);
    },
    async stop() {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        // Already gone.
      }
      await waitFor(
        () => {
          try {
            process.kill(pid, 0);
            return null;
          } catch {
            return true;
          }
        },
        { what: 'pgbouncer to exit', timeoutMs: 10_000 },
      ).catch(() => process.kill(pid, 'SIGKILL'));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
