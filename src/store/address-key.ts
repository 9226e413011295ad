/**
 * The longest text taken as an address. RFC 5321 allows 254 characters in a path;
 * the margin covers padding that trimming removes. A longer value keys nothing (its
 * event is stored and projects nothing), so that no recipient can make an index row
 * too large for the primary keys of contact_status and suppressions.
 */
export const MAX_ADDRESS_CHARS = 320;

/**
 * The SQL expression that turns a text value into the key of contact_status and
 * suppressions: trimmed of ASCII white space and lower-cased, NULL when empty or
 * longer than MAX_ADDRESS_CHARS. One expression, used by the apply statement and by
 * every command that looks an address up, so that the two always agree: `lower()`
 * follows the database's LC_CTYPE for letters outside ASCII, which JavaScript's
 * toLowerCase would not match.
 */
export function addressKeySql(text: string): string {
  return (
    `(CASE WHEN length(${text}) <= ${MAX_ADDRESS_CHARS} ` +
    `THEN NULLIF(lower(btrim(${text}, E' \\t\\n\\r\\f\\u000B')), '') END)`
  );
}
