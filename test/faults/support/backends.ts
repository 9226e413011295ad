import pg from 'pg';
import { TEST_DATABASE_URL } from '../../support/postgres.js';

/** A connection string that names its sessions, so a test can find them in pg_stat_activity. */
export function named(url: string, applicationName: string): string {
  const u = new URL(url);
  u.searchParams.set('application_name', applicationName);
  return u.toString();
}

/** A watcher of pg_stat_activity on its own connection. */
export interface Backends {
  /** How many sessions carry this application_name now. */
  count(applicationName: string): Promise<number>;
  /** Runs any statement on the watcher's connection. */
  query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
  close(): Promise<void>;
}

export async function watchBackends(url = TEST_DATABASE_URL): Promise<Backends> {
  const client = new pg.Client({ connectionString: url, application_name: 'feedsync-faults-watcher' });
  client.on('error', () => {});
  await client.connect();
  return {
    async count(name) {
      const { rows } = await client.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1',
        [name],
      );
      return rows[0]?.n ?? 0;
    },
    query: (text, values) => client.query(text, values),
    close: () => client.end(),
  };
}
