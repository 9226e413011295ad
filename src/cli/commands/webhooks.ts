import { Command } from 'commander';
import type { ServiceClient } from '../../api/client.js';
import { logRetries } from '../../api/retry.js';
import type { Webhook } from '../../api/types.js';
import type { Config } from '../../config/config-type.js';
import { NEW_TYPE_MARK, parseEventTypes } from '../../config/event-types.js';
import { ApiError, ConfigError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { action } from '../context.js';

/** Each subcommand's own exit codes: a line that does not apply to it would mislead. */
const exitCodes = (done: string, failed: string, usage = 'usage or configuration error'): string =>
  `\nExit codes: 0 ${done}, 1 ${failed},\n2 ${usage}, 3 key rejected.`;

/** `feedsync webhooks list|create|delete|test`: the service's webhook registrations. */
export function webhooksCommand(): Command {
  return new Command('webhooks')
    .description("Manage the service's webhook registrations (needs FEED_BASE_URL and FEED_API_KEY).")
    .addHelpText('after', "\nExit codes: each subcommand's --help lists its own; without a subcommand, 2.")
    .addCommand(listCommand())
    .addCommand(createCommand())
    .addCommand(deleteCommand())
    .addCommand(testCommand());
}

function listCommand(): Command {
  return new Command('list')
    .description('List the registrations (a table; --json for scripts).')
    .option('--json', 'print JSON')
    .addHelpText('after', exitCodes('listed', 'runtime failure (the service failed)'))
    .action(
      action(async ({ config, logger }, opts: { json?: boolean }) =>
        withClient(config, logger, async (client) => {
          const list = await client.listWebhooks();
          process.stdout.write(opts.json ? `${JSON.stringify(list, null, 2)}\n` : table(list));
          return 0;
        }),
      ),
    );
}

function createCommand(): Command {
  return new Command('create')
    .description('Register a URL for some event types; prints its signing secret, once.')
    .requiredOption('--url <url>', 'the receiver, e.g. https://app.example.com/webhooks')
    .requiredOption(
      '--events <types>',
      'comma-separated full type names (a type added since this release as +name), or "*" for all',
    )
    .option('--json', 'print JSON (the secret included)')
    .addHelpText(
      'after',
      exitCodes(
        'registered',
        'runtime failure (the service failed)',
        'usage or configuration error (an event type this release does not know, a bad URL)',
      ),
    )
    .action(
      action(async ({ config, logger }, opts: { url: string; events: string; json?: boolean }) => {
        const entries = opts.events
          .split(',')
          .map((e) => e.trim())
          .filter(Boolean);
        if (entries.length === 0) throw new ConfigError('webhooks create: --events is empty', 'USAGE');
        // The FEED_TYPES rule: a typo would register a hook that never fires.
        try {
          parseEventTypes(entries.filter((e) => e !== '*'));
        } catch (err) {
          throw new ConfigError(`webhooks create: --events ${(err as Error).message}`, 'USAGE');
        }
        // In the order given, without the marks of types added since this release.
        const events = [...new Set(entries.map((e) => (e.startsWith(NEW_TYPE_MARK) ? e.slice(1) : e)))];
        if (!isHttpUrl(opts.url)) {
          throw new ConfigError('webhooks create: --url must be an absolute http(s) URL', 'USAGE');
        }
        return withClient(config, logger, async (client) => {
          const created = await client.createWebhook({ url: opts.url, events });
          process.stderr.write(
            'The signing secret below is shown only this once: put it into your secret manager now, and give it\n' +
              'to the receiver as WEBHOOK_SECRET (comma-separate it from the old one during a rotation).\n',
          );
          if (opts.json) process.stdout.write(`${JSON.stringify(created, null, 2)}\n`);
          else {
            process.stdout.write(table([created]));
            process.stdout.write(`signing secret: ${created.signing_secret}\n`);
          }
          return 0;
        });
      }),
    );
}

function deleteCommand(): Command {
  return new Command('delete')
    .argument('<id>')
    .description('Delete a registration; the service stops delivering to it.')
    .addHelpText(
      'after',
      exitCodes('deleted', 'runtime failure (the service failed, or no registration has that id)'),
    )
    .action(
      action(async ({ config, logger }, id: string) =>
        withClient(config, logger, async (client) => {
          await client.deleteWebhook(id).catch((err: unknown) => {
            throw unknownWebhook(err, id);
          });
          process.stdout.write(`deleted ${id}\n`);
          return 0;
        }),
      ),
    );
}

function testCommand(): Command {
  return new Command('test')
    .argument('<id>')
    .description(
      'Ask the service to post a webhook.test event to the registration, and say how the receiver answered.',
    )
    .option('--json', "print the service's answer as JSON")
    .addHelpText(
      'after',
      '\nExit codes: 0 the receiver answered 2xx (or the service did not say), 1 the receiver refused the\n' +
        'connection, did not answer or answered otherwise (the service retries it), or the request failed,\n' +
        '2 usage or configuration error, 3 key rejected.',
    )
    .action(
      action(async ({ config, logger }, id: string, opts: { json?: boolean }) =>
        withClient(config, logger, async (client) => {
          const answer = await client.testWebhook(id).catch((err: unknown) => {
            throw unknownWebhook(err, id);
          });
          const outcome = testOutcome(id, answer);
          process.stdout.write(opts.json ? `${JSON.stringify(answer, null, 2)}\n` : `${outcome.line}\n`);
          if (outcome.failure === null) return 0;
          process.stderr.write(`feedsync: ${outcome.failure}\n`);
          return 1;
        }),
      ),
    );
}

async function withClient(
  config: Config,
  logger: Logger,
  fn: (client: ServiceClient) => Promise<number>,
): Promise<number> {
  const { clientFor } = await import('../../compose/parts.js');
  const client = clientFor(config, {
    retryDeps: { onRetry: logRetries(logger.child({ module: 'webhooks' })) },
  });
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}

/** Columns padded to their widest cell; an empty list says so. */
function table(list: readonly Webhook[]): string {
  if (list.length === 0) return 'no webhooks registered\n';
  const rows = [
    ['ID', 'URL', 'EVENTS', 'CREATED'],
    ...list.map((w) => [
      String(w.id),
      String(w.url),
      Array.isArray(w.events) ? w.events.join(',') : '',
      typeof w.created_at === 'string' ? w.created_at : '',
    ]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const lines = rows.map((r) =>
    r
      .map((cell, i) => cell.padEnd(widths[i]!))
      .join('  ')
      .trimEnd(),
  );
  return `${lines.join('\n')}\n`;
}

/** A 404 on a registration's id: say so, and where to find the ids. */
function unknownWebhook(err: unknown, id: string): unknown {
  if (err instanceof ApiError && err.status === 404) {
    return new ApiError(
      `no webhook registration with id ${id} (HTTP 404); "feedsync webhooks list" shows the ids`,
      { code: 'WEBHOOK_NOT_FOUND', status: 404, cause: err },
    );
  }
  return err;
}

/**
 * What the service said of the test delivery: a line to print, and why it failed
 * (null when the receiver answered 2xx, or the answer does not say).
 */
function testOutcome(id: string, answer: unknown): { line: string; failure: string | null } {
  const a = (answer ?? {}) as {
    event?: { id?: unknown };
    delivery?: { status?: unknown; attempts?: { status?: unknown; error?: unknown }[] };
  };
  const event = typeof a.event?.id === 'string' ? ` ${a.event.id}` : '';
  const sent = `sent a webhook.test event${event} to ${id}`;
  const attempt = a.delivery?.attempts?.at(-1);
  if (attempt === undefined)
    return { line: `${sent}; the service did not say how the receiver answered`, failure: null };
  if (typeof attempt.status !== 'number') {
    const why = String(attempt.error ?? 'no answer');
    return {
      line: `${sent}; the receiver did not answer (${why})`,
      failure: `the receiver of webhook ${id} did not answer (${why}): check that it runs and that the registered URL reaches it`,
    };
  }
  if (attempt.status >= 200 && attempt.status < 300) {
    return { line: `${sent}; the receiver answered ${attempt.status}`, failure: null };
  }
  return {
    line: `${sent}; the receiver answered ${attempt.status}`,
    failure: `the receiver of webhook ${id} answered HTTP ${attempt.status}: check its log (401 is a signing secret that differs from WEBHOOK_SECRET)`,
  };
}
