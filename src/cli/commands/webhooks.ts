import { Command } from 'commander';
import type { ServiceClient } from '../../api/client.js';
import type { Webhook } from '../../api/types.js';
import type { Config } from '../../config.js';
import { action } from '../context.js';

const TYPE_PATTERN = /^[a-z][a-z_]*(\.[a-z][a-z_]*)+$/;

/** `feedsync webhooks list|create|delete|test`: the service's webhook registrations. */
export function webhooksCommand(): Command {
  const webhooks = new Command('webhooks').description(
    "Manage the service's webhook registrations (needs FEED_BASE_URL and FEED_API_KEY).",
  );

  webhooks
    .command('list')
    .description('List the registrations (a table; --json for scripts).')
    .option('--json', 'print JSON')
    .action(
      action(async ({ config }, opts: { json?: boolean }) =>
        withClient(config, async (client) => {
          const list = await client.listWebhooks();
          process.stdout.write(opts.json ? `${JSON.stringify(list, null, 2)}\n` : table(list));
          return 0;
        }),
      ),
    );

  webhooks
    .command('create')
    .description('Register a URL for some event types; prints its signing secret, once.')
    .requiredOption('--url <url>', 'the receiver, e.g. https://app.example.com/webhooks')
    .requiredOption('--events <types>', 'comma-separated full type names, or "*" for all')
    .option('--json', 'print JSON (the secret included)')
    .action(
      action(async ({ config }, opts: { url: string; events: string; json?: boolean }) => {
        const { ConfigError } = await import('../../errors.js');
        const events = [
          ...new Set(
            opts.events
              .split(',')
              .map((e) => e.trim())
              .filter(Boolean),
          ),
        ];
        if (events.length === 0) throw new ConfigError('webhooks create: --events is empty', 'USAGE');
        const bad = events.find((e) => e !== '*' && !TYPE_PATTERN.test(e));
        if (bad !== undefined) {
          throw new ConfigError(
            `webhooks create: --events "${bad}" is not a full type name such as email.delivered (or "*")`,
            'USAGE',
          );
        }
        if (!isHttpUrl(opts.url)) {
          throw new ConfigError('webhooks create: --url must be an absolute http(s) URL', 'USAGE');
        }
        return withClient(config, async (client) => {
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

  webhooks
    .command('delete <id>')
    .description('Delete a registration; the service stops delivering to it.')
    .action(
      action(async ({ config }, id: string) =>
        withClient(config, async (client) => {
          await client.deleteWebhook(id);
          process.stdout.write(`deleted ${id}\n`);
          return 0;
        }),
      ),
    );

  webhooks
    .command('test <id>')
    .description('Ask the service to post a webhook.test event to the registration.')
    .option('--json', "print the service's answer as JSON")
    .action(
      action(async ({ config }, id: string, opts: { json?: boolean }) =>
        withClient(config, async (client) => {
          const answer = await client.testWebhook(id);
          process.stdout.write(opts.json ? `${JSON.stringify(answer, null, 2)}\n` : describeTest(id, answer));
          return 0;
        }),
      ),
    );
  return webhooks;
}

async function withClient(config: Config, fn: (client: ServiceClient) => Promise<number>): Promise<number> {
  const { requireService } = await import('../../config.js');
  const { ServiceClient } = await import('../../api/client.js');
  const client = new ServiceClient({
    ...requireService(config),
    timeoutMs: config.feed.timeoutMs,
    retry: { maxRetries: config.feed.maxRetries, maxRetryWaitMs: config.feed.maxRetryWaitMs },
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

/** One line about a test delivery, from whatever the service answered. */
function describeTest(id: string, answer: unknown): string {
  const a = (answer ?? {}) as {
    event?: { id?: unknown };
    delivery?: { status?: unknown; attempts?: { status?: unknown; error?: unknown }[] };
  };
  const event = typeof a.event?.id === 'string' ? ` ${a.event.id}` : '';
  const attempt = a.delivery?.attempts?.at(-1);
  const outcome =
    attempt === undefined
      ? ''
      : attempt.status === null || attempt.status === undefined
        ? `; first attempt failed (${String(attempt.error ?? 'no answer')})`
        : `; the receiver answered ${String(attempt.status)}`;
  return `sent a webhook.test event${event} to ${id}${outcome}\n`;
}
