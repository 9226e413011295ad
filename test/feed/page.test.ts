import { describe, expect, it } from 'vitest';
import { PageError } from '../../src/errors.js';
import { readEnvelope } from '../../src/feed/envelope.js';
import { feedTypeParam, type PageRules, parsePage } from '../../src/feed/page.js';

const rules = (over: Partial<PageRules> = {}): PageRules => ({
  after: null,
  limit: 3,
  listField: null,
  types: null,
  ...over,
});

function ev(n: number, type = 'email.delivered'): Record<string, unknown> {
  return {
    id: `evt_${n}`,
    type,
    created_at: `2024-05-01T10:00:0${n % 10}.000Z`,
    data: { email_id: `em_${n}`, to: ['a@example.com'] },
  };
}

function pageError(fn: () => unknown): PageError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(PageError);
    return err as PageError;
  }
  throw new Error('expected a PageError');
}

describe('parsePage: the list field (DESIGN section 1)', () => {
  it('reads "data"', () => {
    const page = parsePage({ data: [ev(1)], events: [ev(2)], next_after: 'evt_1' }, rules());
    expect(page.events.map((e) => e.id)).toEqual(['evt_1']);
  });

  it('reads "events" when there is no "data" list', () => {
    const page = parsePage({ data: 'not a list', events: [ev(2)], next_after: 'evt_2' }, rules());
    expect(page.events.map((e) => e.id)).toEqual(['evt_2']);
  });

  it('reads the only array-valued field when neither is there', () => {
    const page = parsePage({ items: [ev(3)], next_after: 'evt_3', meta: { n: 1 } }, rules());
    expect(page.events.map((e) => e.id)).toEqual(['evt_3']);
  });

  it('fails naming the keys it saw when no list is recognisable', () => {
    const err = pageError(() => parsePage({ a: [ev(1)], b: [], next_after: null }, rules()));
    expect(err.code).toBe('NO_LIST');
    expect(err.message).toContain('"a", "b", "next_after"');
    expect(err.message).toContain('FEED_LIST_FIELD');
    expect(pageError(() => parsePage({ next_after: null }, rules())).code).toBe('NO_LIST');
  });

  it('takes the field FEED_LIST_FIELD names, even beside "data"', () => {
    const page = parsePage(
      { results: [ev(4)], data: [ev(5)], next_after: 'evt_4' },
      rules({ listField: 'results' }),
    );
    expect(page.events.map((e) => e.id)).toEqual(['evt_4']);
    const err = pageError(() => parsePage({ data: [ev(5)] }, rules({ listField: 'results' })));
    expect(err.message).toContain('"results" (FEED_LIST_FIELD)');
    expect(err.message).toContain('"data"');
  });

  it.each([
    ['null', null],
    ['an array', [ev(1)]],
    ['a string', 'data'],
    ['a number', 7],
  ])('fails when the body is %s', (_name, body) => {
    expect(pageError(() => parsePage(body, rules())).code).toBe('NO_LIST');
  });

  it('fails when the page holds more events than the limit', () => {
    const err = pageError(() => parsePage({ data: [ev(1), ev(2), ev(3), ev(4)] }, rules()));
    expect(err.code).toBe('TOO_MANY');
    expect(err.exitCode).toBe(1);
  });

  it('fails on a next_after that is neither a string nor null', () => {
    const err = pageError(() => parsePage({ data: [ev(1)], next_after: 12 }, rules()));
    expect(err.code).toBe('BAD_NEXT_AFTER');
  });

  it('fails on a next_after longer than an event id may be, quoting only its start', () => {
    const long = `evt_${'9'.repeat(2_000_000)}`;
    const err = pageError(() => parsePage({ data: [ev(1), ev(2), ev(3)], next_after: long }, rules()));
    expect(err.code).toBe('BAD_NEXT_AFTER');
    expect(err.message).toContain(
      'next_after is 2000004 characters long, more than an event id may be (500)',
    );
    expect(err.message.length).toBeLessThan(200);
    // The longest id kept is a cursor like any other.
    const edge = 'e'.repeat(500);
    expect(parsePage({ data: [ev(1), ev(2), ev(3)], next_after: edge }, rules()).nextAfter).toBe(edge);
  });

  it('an item whose id is too long to keep is quarantined and never becomes the cursor', () => {
    const long = { ...ev(3), id: 'x'.repeat(501) };
    const page = parsePage({ data: [ev(1), ev(2), long] }, rules());
    expect(page.quarantine).toHaveLength(1);
    expect(page.nextAfter).toBe('evt_2');
  });
});

describe('parsePage: the end of the feed', () => {
  it('a full page with a new next_after is not the last', () => {
    const page = parsePage({ data: [ev(1), ev(2), ev(3)], next_after: 'evt_3' }, rules());
    expect(page).toMatchObject({ last: false, nextAfter: 'evt_3', size: 3 });
  });

  it('a page with fewer events than the limit is the last', () => {
    const page = parsePage({ data: [ev(1), ev(2)], next_after: 'evt_2' }, rules());
    expect(page).toMatchObject({ last: true, nextAfter: 'evt_2' });
  });

  it('next_after equal to the after sent is the end', () => {
    const page = parsePage({ data: [ev(1), ev(2), ev(3)], next_after: 'evt_0' }, rules({ after: 'evt_0' }));
    expect(page).toMatchObject({ last: true, nextAfter: 'evt_0' });
  });

  it('a null next_after on a non-empty page means the last event, and the end', () => {
    const page = parsePage({ data: [ev(1), ev(2), ev(3)], next_after: null }, rules({ after: 'evt_0' }));
    expect(page).toMatchObject({ last: true, nextAfter: 'evt_3' });
  });

  it('an absent next_after on a non-empty page means the last event, and the end', () => {
    const page = parsePage({ data: [ev(1), ev(2), ev(3)] }, rules());
    expect(page).toMatchObject({ last: true, nextAfter: 'evt_3' });
  });

  it('the last id counts even when that item goes to quarantine', () => {
    const bad = { ...ev(3), created_at: 'yesterday' };
    const page = parsePage({ data: [ev(1), ev(2), bad] }, rules());
    expect(page).toMatchObject({ last: true, nextAfter: 'evt_3' });
    expect(page.quarantine).toHaveLength(1);
  });

  it('an empty page keeps the after sent (null at the start)', () => {
    expect(parsePage({ data: [], next_after: null }, rules({ after: 'evt_9' }))).toMatchObject({
      last: true,
      nextAfter: 'evt_9',
      size: 0,
    });
    expect(parsePage({ data: [] }, rules())).toMatchObject({ last: true, nextAfter: null });
  });
});

describe('parsePage: items that are not storable events go to quarantine', () => {
  const good = ev(1);
  it.each([
    ['a number', 42, 'not an object'],
    ['null', null, 'not an object'],
    ['a string', 'evt_1', 'not an object'],
    ['an array', [good], 'not an object'],
    ['no id', { ...good, id: undefined }, 'no id'],
    ['an empty id', { ...good, id: '' }, 'no id'],
    ['a numeric id', { ...good, id: 7 }, 'no id'],
    ['no type', { ...good, type: undefined }, 'no type'],
    ['no created_at', { ...good, created_at: undefined }, 'bad created_at'],
    ['a created_at without time', { ...good, created_at: '2024-05-01' }, 'bad created_at'],
    ['a created_at that is no date', { ...good, created_at: '2024-13-45T99:99:99Z' }, 'bad created_at'],
    ['a created_at on 30 February', { ...good, created_at: '2024-02-30T00:00:00Z' }, 'bad created_at'],
    ['a created_at in year 0', { ...good, created_at: '0000-01-01T00:00:00Z' }, 'bad created_at'],
    ['data that is an array', { ...good, data: [] }, 'data is not an object'],
    ['data that is null', { ...good, data: null }, 'data is not an object'],
    ['data that is a string', { ...good, data: 'x' }, 'data is not an object'],
  ])('%s', (_name, item, reason) => {
    const page = parsePage({ data: [ev(0), item], next_after: null }, rules());
    expect(page.events.map((e) => e.id)).toEqual(['evt_0']);
    expect(page.quarantine).toEqual([{ raw: JSON.stringify(item), reason }]);
    expect(readEnvelope(item)).toEqual({ ok: false, reason });
  });

  it('accepts an offset instead of Z, and any type name', () => {
    const item = { ...ev(2, 'email.opened'), created_at: '2024-05-01T10:00:00+02:00' };
    expect(readEnvelope(item)).toMatchObject({ ok: true, event: { created_at: '2024-05-01T08:00:00.000Z' } });
    expect(parsePage({ data: [item] }, rules()).events).toHaveLength(1);
  });
});

describe('type filter', () => {
  it('drops events outside FEED_TYPES client-side and counts them', () => {
    const body = {
      data: [ev(1, 'email.delivered'), ev(2, 'email.bounced'), ev(3, 'contact.subscribed')],
      next_after: 'evt_3',
    };
    const page = parsePage(body, rules({ types: ['contact.subscribed', 'email.bounced'] }));
    expect(page.events.map((e) => e.id)).toEqual(['evt_2', 'evt_3']);
    expect(page).toMatchObject({ filteredOut: 1, size: 3, nextAfter: 'evt_3', last: false });
  });

  it('sends email.X as X and other types by their full name', () => {
    expect(feedTypeParam(['email.delivered', 'email.bounced', 'contact.subscribed', 'webhook.test'])).toEqual(
      ['delivered', 'bounced', 'contact.subscribed', 'webhook.test'],
    );
    expect(feedTypeParam(null)).toBeUndefined();
  });
});
