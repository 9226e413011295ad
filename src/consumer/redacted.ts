import { withoutAddresses } from './events.js';

/** The error as a log line may hold it: its type, code and message, every address in the message taken out. */
export function redacted(err: unknown): Error {
  const source = err instanceof Error ? err : new Error(String(err));
  const clean = new Error(withoutAddresses(source.message));
  clean.name = source.name;
  const code = (source as { code?: unknown }).code;
  if (typeof code === 'string') Object.assign(clean, { code });
  clean.stack = `${clean.name}: ${clean.message}`;
  return clean;
}
