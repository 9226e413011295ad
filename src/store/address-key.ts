/**
 * How far in the future a contact event may be dated and still count as a subscribe
 * (docs/DATA.md, The client's own records): clocks of the service and of Postgres may
 * disagree by this much. A subscribe dated later is not projected at all; any event
 * dated later than its arrival ranks at its arrival, so that no event from the future
 * outranks the ones that really happened, and an unsubscribe always counts.
 */
export const CONTACT_CLOCK_SKEW = "interval '5 minutes'";

/**
 * The SQL expression that turns a mailbox (mailboxes.ts: one bare address, its domain
 * folded) into the key of contact_status and suppressions: the schema's address_key()
 * (migrations/0012_send_guard.sql), which
 * removes every Unicode white space and format character, normalises to NFC and
 * lower-cases, NULL when empty or longer than 320 characters. One function, called by
 * the apply statement and by every command that looks an address up, so that the two
 * always agree: `lower()` follows the database's LC_CTYPE for letters outside ASCII,
 * which JavaScript's toLowerCase would not match.
 */
export function addressKeySql(quotedSchema: string, text: string): string {
  return `${quotedSchema}.address_key(${text})`;
}
