import { redactUrlsInText } from './config/connection-url.js';

/**
 * An e-mail address standing on its own: after the start of the text, a space, a
 * bracket, a quote or a separator, never after `/` (the user of a URL,
 * `postgres://user@host`, is not an address and says where a connection went).
 */
const ADDRESS = /(?<![^\s<>()[\]"',;:])[^\s@<>()[\]"',;:/]+@[^\s@<>()[\]"',;:]+/g;

/**
 * The one scrubbing of every text feedsync writes where people or other programs read
 * it: log lines, the stderr line of a failure, the `last_error` a lease row keeps and
 * `status` prints. A driver's or the service's message is not ours, and the service
 * may echo the API key or a recipient's address back in its errors: every secret value
 * becomes [REDACTED], the password of any URL too, and every e-mail address [address].
 */
export function scrubText(
  text: string,
  secrets: readonly string[],
  opts: {
    /**
     * False keeps addresses: for a line that quotes what the person at the terminal typed
     * (a usage error of `send --to`), never for a stored text or a service's message.
     * Default true.
     */
    addresses?: boolean;
  } = {},
): string {
  let out = text;
  for (const s of secrets) if (s.length > 0 && out.includes(s)) out = out.split(s).join('[REDACTED]');
  out = redactUrlsInText(out);
  return opts.addresses === false ? out : out.replace(ADDRESS, '[address]');
}
