import { describe, expect, it } from 'vitest';
import { logOutcome } from '../../src/sync/worker.js';
import { captureLogger } from './harness.js';

const result = { cursor: null, pages: 0, stored: 0, duplicates: 0, quarantined: 0, durationMs: 1 };

describe("a turn's summary line", () => {
  it('says the relay failed only where it ran and failed, not for a turn a signal stopped', () => {
    const { logger, text } = captureLogger('info');
    logOutcome(
      logger,
      { source: 's', ok: true, result: { ...result, status: 'stopped', drained: false } },
      'info',
    );
    logOutcome(
      logger,
      { source: 's', ok: true, result: { ...result, status: 'caught-up', drained: false } },
      'info',
    );
    const lines = text()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { outcome: string; relayFailed?: boolean });
    expect(lines.map((l) => [l.outcome, l.relayFailed])).toEqual([
      ['stopped', undefined],
      ['caught-up', true],
    ]);
  });
});
