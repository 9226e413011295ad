import { ConfigError } from '../errors.js';

/** Where a requeue starts: rows published at or after a time, or the rows from an event's own row on. */
export type RequeueSince = { time: Date } | { eventId: string };

const UNIT_MS = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
/** The furthest back a duration may reach: a hundred years. */
const MAX_AGO_MS = 36_500 * UNIT_MS.d;
/** Times before this are typing mistakes: nothing was published then. */
const EARLIEST = Date.UTC(1970, 0, 1);

const ISO =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?(Z|([+-])(\d{2}):?(\d{2}))?)?$/i;

/**
 * Reads `--since`: an ISO date or date-time (UTC when it names no zone), or a
 * duration back from now (`90m`, `6h`, `2d`); anything else is an event id.
 * A date that is not on the calendar (`2024-02-30`, `25:00`), a duration past a
 * hundred years, or a time in the future is a usage error, caught before any query.
 */
export function parseSince(value: string, now = Date.now()): RequeueSince {
  const text = value.trim();
  if (text.length === 0) throw usage('give a time or an event id');
  const ago = /^(\d+)(s|m|h|d)$/.exec(text);
  if (ago) {
    const ms = Number(ago[1]) * UNIT_MS[ago[2] as keyof typeof UNIT_MS];
    if (!(ms <= MAX_AGO_MS)) throw usage(`${text} reaches back more than 100 years (36500d)`);
    return { time: new Date(now - ms) };
  }
  const iso = ISO.exec(text);
  if (!iso) return { eventId: text };
  const ms = calendarTime(iso);
  if (ms === null) throw usage(`not a valid date: ${text}`);
  if (ms < EARLIEST) throw usage(`${text} is before 1970`);
  if (ms > now) throw usage(`${text} is in the future: nothing was published after it yet`);
  return { time: new Date(ms) };
}

/** The instant a matched ISO text names, or null when a field is off the calendar or the clock. */
function calendarTime(m: RegExpExecArray): number | null {
  const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i] ?? 0)) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth) return null;
  if (hour > 23 || minute > 59 || second > 59) return null;
  let offsetMin = 0;
  if (m[9] !== undefined) {
    const [oh, om] = [Number(m[10]), Number(m[11])];
    if (oh > 23 || om > 59) return null;
    offsetMin = (m[9] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const fraction = m[7] ? Math.floor(Number(m[7]) * 1000) : 0;
  const utc = Date.UTC(year, month - 1, day, hour, minute, second, fraction);
  // Date.UTC maps years 0-99 to 1900-1999; those are before 1970 either way, and refused.
  return utc - offsetMin * 60_000;
}

function usage(problem: string): ConfigError {
  return new ConfigError(`--since: ${problem}`, 'USAGE');
}
