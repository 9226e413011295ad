import { expect, it } from 'vitest';
import { KNOWN_EVENT_TYPES } from '../../src/event-types.js';
import { MAX_TYPE_LENGTH, readEnvelope } from '../../src/feed/envelope.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { nothingApplied } from '../../src/store/applier.js';

const noGauges = {
  cursorLagSeconds: async () => new Map<string, number>(),
  outboxBacklog: async () => 0,
  lastSuccessSeconds: async () => new Map<string, number>(),
  fleetStates: async () => ({ counts: { sources: 1, failing: 0, lagging: 0, neverSucceeded: 0 }, worst: [] }),
  sourcesOverdue: async () => 0,
};

it('the type label of feedsync_events_stored_total is a known type or "other": 2,003 distinct types make at most 9 series', async () => {
  const metrics = createMetrics(noGauges, ['s']);
  const types = [
    ...KNOWN_EVENT_TYPES,
    ...Array.from({ length: 2_003 }, (_, i) => `x.t${i}${'y'.repeat(90)}`),
  ];
  const inserted = types.map((type, i) => ({
    id: `e${i}`,
    type,
    created_at: '2024-05-01T00:00:00Z',
    data: {},
  }));
  metrics.hooksFor('s').onCommit({
    pages: 1,
    result: { ...nothingApplied(), inserted },
  });
  const text = await metrics.registry.metrics();
  const series = [...text.matchAll(/^feedsync_events_stored_total\{source="s",type="([^"]+)"\} (\d+)$/gm)];
  expect(series.map((m) => m[1]).sort()).toEqual([...KNOWN_EVENT_TYPES, 'other'].sort());
  expect(series.find((m) => m[1] === 'other')?.[2]).toBe('2003');
  expect(Math.max(...text.split('\n').map((l) => l.length))).toBeLessThan(400);
});

it('a type longer than the limit goes to quarantine, as a long id does', () => {
  const base = { id: 'e1', created_at: '2024-05-01T00:00:00Z', data: {} };
  expect(readEnvelope({ ...base, type: `x.${'y'.repeat(MAX_TYPE_LENGTH - 2)}` }).ok).toBe(true);
  expect(readEnvelope({ ...base, type: `x.${'y'.repeat(100_000)}` })).toEqual({
    ok: false,
    reason: `type longer than ${MAX_TYPE_LENGTH} characters`,
  });
});
