import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { Command } from 'commander';
import { isAddress, isFromField } from '../../api/address.js';
import { logRetries } from '../../api/retry.js';
import type { SendEmailRequest } from '../../api/types.js';
import type { Config } from '../../config/config-type.js';
import { requireService } from '../../config/source-config.js';
import { ApiError, ConfigError, FeedsyncError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { action } from '../context.js';
import { describeFailure } from '../failure.js';
import { knownSourceConfig } from '../known-source.js';
import { withStore } from '../with-store.js';

interface SendFlags {
  from?: string;
  to?: string[];
  subject?: string;
  html?: string;
  htmlFile?: string;
  idempotencyKey?: string;
  json?: boolean;
  source?: string;
  allowSuppressed?: boolean;
}

const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

/** Failures before any byte of the request left: no connection, or no TLS session. */
const NO_CONNECTION = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

function neverConnected(err: ApiError): boolean {
  const cause = (err.cause as { code?: unknown } | undefined)?.code;
  return err.code === 'TLS' || (err.status === 0 && typeof cause === 'string' && NO_CONNECTION.has(cause));
}

/**
 * `feedsync send`: the one explicit send, and the only code path that calls
 * POST /emails. Every field is checked before any request; the Idempotency-Key
 * (given or generated) is printed before the request, so a send whose outcome is
 * unknown can be retried with it and is still delivered once. A recipient suppressed
 * for the source (bounced, complained, unsubscribed) stops the send before any
 * request, unless --allow-suppressed says to send anyway.
 */
export function sendCommand(): Command {
  return new Command('send')
    .description('Send one email through the service, idempotently (the only command that ever sends).')
    .option('--from <address>', 'sender: app@example.com, or "Acme <app@example.com>"')
    .option('--to <addresses>', 'recipient; repeat the flag or separate with commas', collect)
    .option('--subject <text>', 'subject line (may be empty)')
    .option('--html <html>', 'HTML body')
    .option('--html-file <path>', 'read the HTML body from a file instead')
    .option('--idempotency-key <key>', 'reuse a key to retry a send safely (default: a new UUID, printed)')
    .option('--json', 'print {"id", "idempotency_key"} as JSON')
    .option(
      '--source <source>',
      'the account to send through and whose suppressions apply: FEED_SOURCE, a source of FEED_SOURCES_FILE, or one with a stored cursor (its base URL and key) (default FEED_SOURCE)',
    )
    .option(
      '--allow-suppressed',
      'send even to recipients that bounced, complained or unsubscribed (feedsync suppressions list)',
    )
    .addHelpText(
      'after',
      '\nA send that failed or timed out may still have happened: run it again with the printed\n' +
        '--idempotency-key and the same fields, and the service reports the same id without sending twice\n' +
        '("already sent as …"). A refused connection sent nothing, and says so.\n' +
        'Before any request, the recipients are checked against the suppressions of the source (Postgres,\n' +
        'DATABASE_URL): one that bounced, complained or unsubscribed stops the send, unless --allow-suppressed.\n' +
        'Exit codes: 0 sent (or already sent with this key), 1 failed (also: Postgres could not be asked),\n' +
        '2 missing or invalid fields, a suppressed recipient, or an --idempotency-key used before with other\n' +
        'fields (HTTP 409), 3 key rejected.',
    )
    .action(action(({ config, logger }, flags: SendFlags) => send(config, logger, flags)));
}

const usage = (message: string) => new ConfigError(message, 'USAGE');

async function send(config: Config, logger: Logger, flags: SendFlags): Promise<number> {
  const email = await emailOf(flags);
  const key = flags.idempotencyKey ?? randomUUID();
  if (key.length === 0 || key.length > 256)
    throw usage('send: --idempotency-key must be 1 to 256 characters');
  const own = await knownSourceConfig(config, logger, flags.source);
  // Asked before the key is printed: without the service, nothing was tried.
  requireService(own);
  if (!flags.allowSuppressed) {
    const refusal = await suppressedRecipients(own, logger, email.to, flags.idempotencyKey);
    if (refusal !== null) {
      // Written here, not thrown: a failure's line also goes to the debug log, and addresses never do.
      process.stderr.write(`feedsync: ${refusal}\n`);
      return 2;
    }
  }

  // Printed before the request: if the outcome is never known, the key makes a retry safe.
  if (flags.idempotencyKey === undefined) process.stderr.write(`idempotency key: ${key}\n`);
  return sendOnce(own, logger, email, key, flags.json === true);
}

/** The email the flags describe, every field checked (a USAGE error names the first one wrong). */
async function emailOf(flags: SendFlags): Promise<SendEmailRequest> {
  const from = flags.from?.trim();
  if (!from) throw usage('send: --from is required');
  if (!isFromField(from)) {
    throw usage(
      `send: --from "${from}" is neither an address (app@example.com) nor a name and an address (Acme <app@example.com>)`,
    );
  }
  const to = (flags.to ?? [])
    .flatMap((t) => t.split(','))
    .map((t) => t.trim())
    .filter(Boolean);
  if (to.length === 0) throw usage('send: --to is required (repeat it or separate addresses with commas)');
  const bad = to.find((address) => !isAddress(address));
  if (bad !== undefined) throw usage(`send: --to "${bad}" is not an email address`);
  if (flags.subject === undefined) throw usage('send: --subject is required (it may be empty)');
  if (flags.html !== undefined && flags.htmlFile !== undefined) {
    throw usage('send: give either --html or --html-file, not both');
  }
  let html = flags.html;
  if (flags.htmlFile !== undefined) {
    try {
      html = await readFile(flags.htmlFile, 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      throw usage(`send: cannot read --html-file ${flags.htmlFile} (${code})`);
    }
  }
  if (html === undefined) throw usage('send: --html or --html-file is required');
  return { from, to, subject: flags.subject, html };
}

/** POST /emails under `key`, and what its outcome means for a retry, on stdout or stderr. */
async function sendOnce(
  config: Config,
  logger: Logger,
  email: SendEmailRequest,
  key: string,
  json: boolean,
): Promise<number> {
  const { clientFor } = await import('../../compose/parts.js');
  const logRetry = logRetries(logger.child({ module: 'send' }));
  // Whether any attempt reached the service: only then can the outcome be unknown.
  let mayHaveSent = false;
  const client = clientFor(config, {
    retryDeps: {
      onRetry: (info) => {
        if (!neverConnected(info.error)) mayHaveSent = true;
        logRetry(info);
      },
    },
  });
  try {
    const { id, replayed } = await client.sendEmail(email, { idempotencyKey: key });
    // A replay after an attempt of this run that may have reached the service can be that
    // attempt's own send (its answer lost): only a replay on the first contact was sent before.
    const again = replayed && !mayHaveSent;
    process.stdout.write(
      json
        ? `${JSON.stringify({ id, idempotency_key: key, replayed: again })}\n`
        : again
          ? `already sent as ${id} with idempotency key ${key}: nothing sent again\n`
          : `sent ${id} (idempotency key ${key})\n`,
    );
    return 0;
  } catch (err) {
    if (err instanceof ApiError && err.status === 409) {
      throw usage(
        `send: the idempotency key ${key} was used before with other fields (HTTP 409), and nothing was sent: ` +
          'repeat those same fields with it, or leave out --idempotency-key for a new send',
      );
    }
    if (err instanceof ApiError && neverConnected(err) && !mayHaveSent) {
      process.stderr.write('feedsync: nothing was sent: no connection to the service was made\n');
    } else if (err instanceof ApiError && (err.status === 0 || err.status >= 500)) {
      // No answer, or a server error: the service may have sent it. A 4xx refused it for sure.
      process.stderr.write(
        `feedsync: the send may or may not have happened; retry with --idempotency-key ${key} and the same fields\n`,
      );
    }
    throw err;
  } finally {
    await client.close();
  }
}

/**
 * The line that refuses a send to suppressed recipients, or null when none is. The
 * check needs the migrated schema: when Postgres cannot say, nothing is sent, and the
 * error names --allow-suppressed as the way to send without asking.
 */
async function suppressedRecipients(
  config: Config,
  logger: Logger,
  to: readonly string[],
  /** --idempotency-key, when given: a send under it may have gone out before the address was suppressed. */
  givenKey?: string,
): Promise<string | null> {
  const { suppressionsAmong } = await import('../../store/suppressions.js');
  const { source } = config.feed;
  let found: Awaited<ReturnType<typeof suppressionsAmong>>;
  try {
    found = await withStore(config, logger, (store) => suppressionsAmong(store, source, to));
  } catch (err) {
    // The cause's own code and exit code: 2 for a schema not migrated, 1 for a database that did not answer.
    const message =
      `send: nothing was sent: the suppressions of source ${source} could not be checked: ` +
      `${describeFailure(err, config)}; or pass --allow-suppressed to send without the check`;
    if (err instanceof FeedsyncError) {
      throw new FeedsyncError(message, { code: err.code, exitCode: err.exitCode, cause: err });
    }
    throw new Error(message, { cause: err });
  }
  if (found.length === 0) return null;
  const named = found
    .map((s) => `${s.address} (${s.reason} ${s.at.toISOString()}, event ${s.eventId})`)
    .join(', ');
  // A retry with the key of a send that went out (and bounced since) must not say that nothing was sent.
  const earlier =
    givenKey === undefined
      ? ''
      : `; an earlier send with idempotency key ${givenKey}, if there was one, went out before and stands (the ` +
        'suppression may come from its own bounce)';
  return (
    `send: nothing was sent now: suppressed for source ${source}: ${named}${earlier}; ` +
    'pass --allow-suppressed to send to them anyway (or "feedsync suppressions remove <address>")'
  );
}
