/**
 * RFC 3339 date-time, as the envelope's created_at: `T`/`t` between date and time,
 * `Z`/`z` or a ±hh:mm offset (±hhmm too), seconds up to 60 (a leap second), any
 * number of fraction digits.
 */
const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):?(\d{2}))$/;

/** Postgres keeps microseconds; more digits are cut off here (it would round, or refuse hundreds). */
const FRACTION_DIGITS = 6;

/**
 * created_at in one form per instant, the one Postgres prints back for jobs
 * (queue/job-data.ts): UTC, `Z`, three fraction digits, or six when the instant has
 * microseconds (as `Date.toISOString()` prints, then Postgres's precision); a leap
 * second rolled over into the next minute (as Postgres does), years 1 to 9999 after
 * the shift to UTC. A value already in that form is returned as it came. Null when
 * it is no valid date-time: 30 February, hour 24, minute 60, an offset of 24 hours
 * or more.
 */
export function normaliseTimestamp(text: string): string | null {
  const m = RFC3339.exec(text);
  if (!m) return null;
  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  const hour = Number(m[4]);
  const minute = Number(m[5]);
  const second = Number(m[6]);
  const fraction = m[7] ?? '';
  // Already canonical: upper-case T and Z, no leap second, milliseconds or non-zero microseconds.
  const canonical =
    m[8] === 'Z' &&
    text[10] === 'T' &&
    second < 60 &&
    (fraction.length === 3 || (fraction.length === FRACTION_DIGITS && !fraction.endsWith('000')));
  const offsetHours = Number(m[10] ?? 0);
  const offsetMinutes = Number(m[11] ?? 0);
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return null;
  if (hour > 23 || minute > 59 || second > 60 || offsetHours > 23 || offsetMinutes > 59) return null;
  if (year < 1) return null;
  if (canonical) return text;

  const sign = m[9] === '-' ? -1 : 1;
  const at = new Date(0);
  // setUTCFullYear, not Date.UTC: the latter reads years 0 to 99 as 1900 to 1999.
  at.setUTCFullYear(year, month - 1, day);
  at.setUTCHours(hour, minute - sign * (offsetHours * 60 + offsetMinutes), second, 0);
  const utcYear = at.getUTCFullYear();
  if (utcYear < 1 || utcYear > 9999) return null;
  const digits = fraction.slice(0, FRACTION_DIGITS).padEnd(FRACTION_DIGITS, '0');
  return `${at.toISOString().slice(0, 19)}.${digits.endsWith('000') ? digits.slice(0, 3) : digits}Z`;
}

function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}
