import { describe, expect, it } from 'vitest';
import type { ServiceEvent } from '../../src/api/types.js';
import { cursorEventOf, eventDigest } from '../../src/sync/cursor-check.js';

const event = (id: string, data: Record<string, unknown>): ServiceEvent => ({
  id,
  type: 'email.sent',
  created_at: '2026-01-02T03:04:05.000Z',
  data,
});

describe('the cursor event check', () => {
  it("a digest follows the content, not the order of the data's keys or the way the instant is written", () => {
    const a = eventDigest(event('e1', { email_id: 'm1', to: ['a@example.com'] }));
    expect(eventDigest(event('e1', { to: ['a@example.com'], email_id: 'm1' }))).toBe(a);
    expect(
      eventDigest({
        ...event('e1', { email_id: 'm1', to: ['a@example.com'] }),
        created_at: '2026-01-02T04:04:05+01:00',
      }),
    ).toBe(a);
    expect(eventDigest(event('e1', { email_id: 'm2', to: ['a@example.com'] }))).not.toBe(a);
  });

  it('records the event before the cursor, or where the cursor stood, and nothing when the cursor is not the last event', () => {
    const events = [event('e1', {}), event('e2', {})];
    expect(cursorEventOf(events, 'e0', 'e2')).toEqual({ before: 'e1', digest: eventDigest(events[1]!) });
    expect(cursorEventOf(events.slice(0, 1), 'e0', 'e1')?.before).toBe('e0');
    expect(cursorEventOf(events.slice(0, 1), null, 'e1')?.before).toBeNull();
    expect(cursorEventOf(events, 'e0', 'e3')).toBeNull();
  });
});
