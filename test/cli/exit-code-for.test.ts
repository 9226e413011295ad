import { describe, expect, it } from 'vitest';
import { exitCodeFor } from '../../src/cli/run-sources.js';
import { ApiError, AuthError } from '../../src/errors.js';
import { foreignFeedError } from '../../src/store/foreign-feed.js';
import type { Outcome } from '../../src/sync/scheduler.js';

const fails = (source: string, error: unknown): Outcome => ({ source, ok: false, error });
const lostCursor = () => new ApiError('lost cursor', { code: 'UNKNOWN_CURSOR', status: 400, exitCode: 2 });
const down = () => new ApiError('down', { code: 'NETWORK', status: 0 });

describe('the exit code of a run over many sources', () => {
  it('is 3 when only keys were rejected, 2 when every failure needs an operator, else 1', () => {
    expect(exitCodeFor([fails('a', new AuthError(401)), fails('b', new AuthError(403))])).toBe(3);
    expect(exitCodeFor([fails('a', lostCursor()), fails('b', new AuthError(401))])).toBe(2);
    expect(exitCodeFor([fails('a', lostCursor())])).toBe(2);
    expect(exitCodeFor([fails('a', lostCursor()), fails('b', down())])).toBe(1);
    expect(exitCodeFor([])).toBe(0);
  });

  it("is 5 when only feeds of another account were refused, 2 when they come with other operator's failures", () => {
    const foreign = () => foreignFeedError('a', { conflicts: 100, events: 100 });
    expect(exitCodeFor([fails('a', foreign()), fails('b', foreign())])).toBe(5);
    expect(exitCodeFor([fails('a', foreign()), fails('b', lostCursor())])).toBe(2);
    expect(exitCodeFor([fails('a', foreign()), fails('b', down())])).toBe(1);
  });
});
