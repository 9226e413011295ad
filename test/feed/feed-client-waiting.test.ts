import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { createFeedClient } from '../../src/feed/feed-client.js';

// A feed that hangs would leave a run silent for all of FEED_TIMEOUT_MS: the client says
// once, after `afterMs`, that a request is still waiting. A stand-in service whose answer
// is held back: the wait is arranged, not measured.
describe('a feed request that goes unanswered', () => {
  it('is told once, and not for a request answered in time', async () => {
    const told: number[] = [];
    let answer: () => void = () => {};
    const fetchPage = createFeedClient({
      client: {
        eventsPage: () =>
          new Promise((resolve) => {
            answer = () => resolve({ body: { data: [], has_more: false }, bytes: 2 });
          }),
      },
      limit: 10,
      listField: null,
      types: null,
      retry: { maxRetries: 0, maxRetryWaitMs: 0 },
      waiting: { afterMs: 20, tell: (ms) => told.push(ms) },
    });
    const slow = fetchPage(null);
    await sleep(100);
    answer();
    await slow;
    expect(told).toEqual([20]);
    const quick = fetchPage(null);
    answer();
    await quick;
    await sleep(50);
    expect(told).toEqual([20]);
  });
});
