import type { ServiceEvent } from '../api/types.js';

/**
 * The synthetic backlog: event N is computed from N alone, so a backlog of a
 * million events costs no memory. The feed repeats a cycle of ten emails, each
 * with its `email.sent` and then its outcome: seven delivered, one bounced, one
 * complained (delivered, then complained) and one failed.
 */

/** Gap between the `created_at` of consecutive backlog events. */
export const BACKLOG_STEP_MS = 100;

const OUTCOMES = [
  'delivered',
  'delivered',
  'delivered',
  'bounced',
  'delivered',
  'delivered',
  'complained',
  'delivered',
  'failed',
  'delivered',
] as const;

interface Slot {
  /** Which email of the cycle. */
  email: number;
  type: string;
}

const CYCLE: readonly Slot[] = OUTCOMES.flatMap((outcome, email): Slot[] => {
  const slots: Slot[] = [{ email, type: 'email.sent' }];
  if (outcome === 'complained') slots.push({ email, type: 'email.delivered' });
  slots.push({ email, type: `email.${outcome}` });
  return slots;
});

function slotAt(position: number): { slot: Slot; emailNumber: number } {
  const k = position - 1;
  const slot = CYCLE[k % CYCLE.length]!;
  return { slot, emailNumber: Math.floor(k / CYCLE.length) * OUTCOMES.length + slot.email + 1 };
}

/** The type of backlog event `position` (1-based), without building the event. */
export function backlogType(position: number): string {
  return slotAt(position).slot.type;
}

/**
 * Backlog event `position` (1-based); `startMs` is the `created_at` of event 1.
 * With an `account`, its content names that account (the same ids in two
 * accounts then carry different emails); without, it reads as it always did.
 */
export function backlogEvent(
  position: number,
  id: string,
  startMs: number,
  account: string | null = null,
): ServiceEvent {
  return backlogEventAt(position, id, startMs + (position - 1) * BACKLOG_STEP_MS, account);
}

/** Synthetic event number `ordinal` (1-based, its content) with the id and `created_at` given. */
export function backlogEventAt(
  ordinal: number,
  id: string,
  createdAtMs: number,
  account: string | null,
): ServiceEvent {
  const { slot, emailNumber } = slotAt(ordinal);
  const outcome = OUTCOMES[slot.email]!;
  const number = String(emailNumber).padStart(9, '0');
  const domain = account === null ? 'example.test' : `${account.replace('_', '-')}.example.test`;
  return {
    type: slot.type,
    id,
    created_at: new Date(createdAtMs).toISOString(),
    data: {
      email_id: account === null ? `em_bl_${number}` : `em_bl_${account}_${number}`,
      from: `backlog@${domain}`,
      // The local part names the outcome, as it would for a real send.
      to: [`${outcome}+${emailNumber}@${domain}`],
      subject: `Backlog message ${emailNumber}`,
    },
  };
}
