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
});
