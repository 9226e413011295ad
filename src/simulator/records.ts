import type { ServiceEvent } from '../api/types.js';
import { mailboxesOf } from '../store/mailboxes.js';

/** A contact's latest state, as feedsync's contact_status will hold it. */
export interface ContactRecord {
  email: string;
  status: 'subscribed' | 'unsubscribed';
  last_event_id: string;
  last_event_at: string;
}

/** A suppressed address, as feedsync's suppressions table will hold it. */
export interface SuppressionRecord {
  address: string;
  reason: 'bounced' | 'complained' | 'unsubscribed';
  event_id: string;
  at: string;
}

const HARD = new Set(['email.complained', 'email.bounced']);

/**
 * The keys of a recipient value as feedsync makes them (docs/DATA.md): its mailboxes,
 * domains folded, then white space and format characters removed, NFC, lower case.
 */
const keysOf = (value: unknown): string[] =>
  mailboxesOf(value)
    .filter((m) => m.length <= 320)
    .map((m) =>
      m
        .replace(/[\p{White_Space}\p{Cf}]/gu, '')
        .normalize('NFC')
        .toLowerCase(),
    )
    .filter((key) => key !== '');

/** a after b: later created_at, then greater id (the simulator's created_at are all UTC ISO strings). */
const later = (a: ServiceEvent, b: ServiceEvent): boolean =>
  a.created_at !== b.created_at ? a.created_at > b.created_at : a.id > b.id;

/**
 * What feedsync's own records (contact_status, suppressions) will hold once a worker
 * has stored these events, by docs/DATA.md's rules: the latest contact event of each
 * address; every recipient of a bounce or a complaint (one row per reason, the earliest
 * event of each), and the contacts whose latest event is an unsubscribe. For the
 * dashboard: the events a person made, never the synthetic backlog, so none is dated
 * in the future and the clock skew rule never applies.
 */
export function recordsOf(events: Iterable<ServiceEvent>): {
  contacts: ContactRecord[];
  suppressions: SuppressionRecord[];
} {
  const contacts = new Map<string, ServiceEvent>();
  const hard = new Map<string, { address: string; e: ServiceEvent }>();
  for (const e of events) {
    if (e.type === 'contact.subscribed' || e.type === 'contact.unsubscribed') {
      for (const email of typeof e.data.email === 'string' ? keysOf(e.data.email) : []) {
        const held = contacts.get(email);
        if (held === undefined || later(e, held)) contacts.set(email, e);
      }
    } else if (HARD.has(e.type)) {
      for (const address of keysOf(e.data.to)) {
        const held = hard.get(`${address}\n${e.type}`);
        if (held === undefined || later(held.e, e)) hard.set(`${address}\n${e.type}`, { address, e });
      }
    }
  }
  const suppressions: SuppressionRecord[] = [...hard.values()].map(({ address, e }) => ({
    address,
    reason: e.type === 'email.complained' ? 'complained' : 'bounced',
    event_id: e.id,
    at: e.created_at,
  }));
  for (const [email, e] of contacts) {
    if (e.type === 'contact.unsubscribed') {
      suppressions.push({ address: email, reason: 'unsubscribed', event_id: e.id, at: e.created_at });
    }
  }
  const byKey = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return {
    contacts: [...contacts]
      .map(([email, e]) => ({
        email,
        status: e.type === 'contact.subscribed' ? ('subscribed' as const) : ('unsubscribed' as const),
        last_event_id: e.id,
        last_event_at: e.created_at,
      }))
      .sort((a, b) => byKey(a.email, b.email)),
    suppressions: suppressions.sort((a, b) => byKey(a.address, b.address) || byKey(a.reason, b.reason)),
  };
}
