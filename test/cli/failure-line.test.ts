import { describe, expect, it } from 'vitest';
import { describeFailure } from '../../src/cli/failure.js';
import { testConfig } from '../support/config.js';

const config = testConfig({ schema: 'unused', prefix: 'unused' });

describe('the one line of a failure', () => {
  it('reads a message that ends in a full stop as a clause: no ".:"', () => {
    const closed = Object.assign(new Error('Connection is closed.'), {});
    const line = describeFailure(closed, config);
    expect(line).toBe(
      'Redis (REDIS_URL) failed: Connection is closed: check REDIS_URL and that the server runs',
    );
    expect(line).not.toContain('.:');
  });

  it('names DATABASE_STATEMENT_TIMEOUT_MS and the host when a statement passed its deadline', () => {
    const line = describeFailure(new Error('Query read timeout'), config);
    expect(line).toContain(`within ${config.database.statementTimeoutMs} ms (DATABASE_STATEMENT_TIMEOUT_MS)`);
    expect(line).toMatch(/^Postgres at [^ ]+ \(DATABASE_URL\) did not answer a statement/);
  });

  it('says the server is at max_connections when Postgres has no connection left', () => {
    const full = Object.assign(new Error('sorry, too many clients already'), {
      severity: 'FATAL',
      code: '53300',
    });
    expect(describeFailure(full, config)).toBe(
      'Postgres (DATABASE_URL) refused: sorry, too many clients already (SQLSTATE 53300): the server is at ' +
        'max_connections: close idle sessions or other clients, lower SYNC_CONCURRENCY here, or raise ' +
        'max_connections (or put a pooler in front); try again',
    );
  });
});
