import { Command, InvalidArgumentError, Option } from 'commander';
import { createLogger } from '../../logger.js';
import { launchedByNpm } from '../launched-by-npm.js';
import { onParentGone } from '../shutdown.js';

interface SimulatorFlags {
  port: number;
  host: string;
  keyPrefix?: string;
  timeScale: number;
  backlog: number;
  maxAccounts: number;
  rateLimit?: number;
  latencyMs?: number;
  rate429?: number;
  retryAfterSec?: number;
  rate5xx?: number;
  duplicateRate?: number;
  slowBodyMs?: number;
  truncateRate?: number;
  hangRate?: number;
  trustNetwork: boolean;
  logLevel: string;
  webhookScheme: 'service' | 'standard';
  webhookBodyWithoutId: boolean;
}

const FAULT_FLAGS = [
  'latencyMs',
  'rate429',
  'retryAfterSec',
  'rate5xx',
  'duplicateRate',
  'slowBodyMs',
  'truncateRate',
  'hangRate',
] as const;

function number(min: number, max: number, whole = false) {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n < min || n > max || (whole && !Number.isInteger(n))) {
      throw new InvalidArgumentError(`must be a ${whole ? 'whole number' : 'number'} from ${min} to ${max}`);
    }
    return n;
  };
}

const share = number(0, 1);
const ms = number(0, 600_000, true);

/**
 * `feedsync simulator`: a local stand-in for the service. Needs no FEED_*
 * configuration; it runs until SIGINT or SIGTERM.
 */
export function simulatorCommand(): Command {
  return (
    new Command('simulator')
      .description(
        'Run a local stand-in for the email delivery service, state in memory (docs/SIMULATOR.md).',
      )
      // addCommand does not pass the program's settings down: a bad flag must still reach cli.ts (exit 2).
      .exitOverride()
      .showHelpAfterError()
      .option('--port <port>', 'TCP port; 0 picks a free one', number(0, 65_535, true), 4010)
      .option('--host <host>', 'interface to listen on', '127.0.0.1')
      .option(
        '--key-prefix <prefix>',
        'accept only <prefix>_test_… and <prefix>_live_… keys (default: any lowercase prefix)',
      )
      .option(
        '--time-scale <factor>',
        'multiply the webhook retry gaps (about a day in all)',
        number(0, 1_000),
        1,
      )
      .option(
        '--backlog <n>',
        'a synthetic backlog of N events at the start of the feed',
        number(0, 1e11, true),
        0,
      )
      .option(
        '--max-accounts <n>',
        'the most accounts (one per key) it makes; a new key past it gets 403',
        number(1, 1_000_000, true),
        1_000,
      )
      .option(
        '--rate-limit <n>',
        'each account may make at most N requests a second over every endpoint, sends included; answers ' +
          'carry RateLimit-Limit/-Remaining/-Reset, and a request past it gets 429 with Retry-After (default: no limit)',
        number(1, 1_000_000, true),
      )
      .option('--latency-ms <ms>', 'milliseconds added to every /api response', ms)
      .option('--rate-429 <share>', 'share (0..1) of /api requests answered 429 with Retry-After', share)
      .option('--retry-after-sec <s>', 'the Retry-After sent with a 429 (default 1)', number(0, 86_400, true))
      .option('--rate-5xx <share>', 'share (0..1) of /api requests answered 503', share)
      .option(
        '--duplicate-rate <share>',
        'share (0..1) of feed pages that repeat the end of the previous page',
        share,
      )
      .option('--slow-body-ms <ms>', 'drip each /events body out over this many ms', ms)
      .option('--truncate-rate <share>', 'share (0..1) of /events bodies cut short', share)
      .option('--hang-rate <share>', 'share (0..1) of /events responses that never finish', share)
      .option(
        '--trust-network',
        'admit clients from any address to the dashboard and /_sim (Docker Compose): whoever reaches ' +
          'the port reads the emails sent and sets the faults (default: loopback clients only)',
        false,
      )
      .addOption(
        new Option(
          '--webhook-scheme <scheme>',
          'how webhook deliveries are signed: service (Service-Signature) or standard (Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature)',
        )
          .choices(['service', 'standard'])
          .default('service'),
      )
      .option(
        '--webhook-body-without-id',
        'with --webhook-scheme standard, post bodies without their id, as Resend does (the id is in webhook-id)',
        false,
      )
      .addOption(
        new Option('--log-level <level>', 'requests are logged at debug')
          .choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
          .default('info'),
      )
      .addHelpText(
        'after',
        '\nEach API key has an account of its own (feed, emails, webhooks, backlog); --backlog applies to\n' +
          'every account. The control API (loopback clients only) is at /_sim:\n' +
          '  GET /_sim/stats                 counters, in all and per account (rate_limited: 429s of --rate-limit)\n' +
          '  GET|POST /_sim/faults           the fault knobs (POST a patch: {"rate5xx": 0.2})\n' +
          '  POST /_sim/backlog {count}      a synthetic backlog of that many events\n' +
          '  POST /_sim/contacts {type, email}   a contact.subscribed or contact.unsubscribed event\n' +
          "  GET /_sim/webhooks/{id}/deliveries   a registration's deliveries and their attempts\n" +
          '  POST /_sim/webhooks/{id}/deliveries/{delivery}/resend   deliver one again\n' +
          '  POST /_sim/webhooks/{id}/test   post a webhook.test event to a registration\n' +
          '  GET /_sim/accounts              the accounts (what the page lists)\n' +
          '  GET /_sim/accounts/{account}/webhooks|emails|events|records   what the page shows of an account\n' +
          'Add "key" (or "account") to a body to act on that account (default: the example key\'s).\n' +
          'Stop with Ctrl-C (SIGINT) or SIGTERM.\n' +
          'What it serves and every knob: docs/SIMULATOR.md (in the repository).\n' +
          'Exit codes: 0 stopped by a signal, 1 could not start (the port is in use), 2 usage error.',
      )
      .action(async (flags: SimulatorFlags) => {
        process.exitCode = await runSimulator(flags);
      })
  );
}

async function runSimulator(flags: SimulatorFlags): Promise<number> {
  if (flags.webhookBodyWithoutId && flags.webhookScheme !== 'standard') {
    process.stderr.write('feedsync: --webhook-body-without-id needs --webhook-scheme standard\n');
    return 2;
  }
  const { startSimulator } = await import('../../simulator/index.js');
  const logger = createLogger({ level: flags.logLevel });
  const faults: Record<string, number> = {};
  for (const name of FAULT_FLAGS) if (flags[name] !== undefined) faults[name] = flags[name];

  let sim: Awaited<ReturnType<typeof startSimulator>>;
  try {
    sim = await startSimulator({
      port: flags.port,
      host: flags.host,
      timeScale: flags.timeScale,
      backlog: flags.backlog,
      maxAccounts: flags.maxAccounts,
      faults,
      logger: logger.child({ module: 'simulator' }),
      trustNetwork: flags.trustNetwork,
      webhookScheme: flags.webhookScheme,
      webhookBodyWithoutId: flags.webhookBodyWithoutId,
      ...(flags.rateLimit === undefined ? {} : { rateLimit: flags.rateLimit }),
      ...(flags.keyPrefix === undefined ? {} : { keyPrefix: flags.keyPrefix }),
    });
  } catch (err) {
    process.stderr.write(`feedsync: cannot start the simulator: ${(err as Error).message}\n`);
    return (err as NodeJS.ErrnoException).code === undefined ? 2 : 1;
  }

  // The default account's key: /_sim calls that name no account act on it.
  const key = sim.defaultKey;
  // One write, so a script reading the output sees the whole banner at once.
  console.log(
    [
      `Simulator listening at ${sim.baseUrl}`,
      `Example key: ${key}`,
      `  export FEED_BASE_URL=${sim.baseUrl} FEED_API_KEY=${key}`,
      `Dashboard:   ${sim.origin}/ (webhooks, deliveries, emails, events; ${flags.trustNetwork ? 'clients from any address: --trust-network' : 'loopback only'})`,
      `Control API: ${sim.origin}/_sim/stats (Ctrl-C to stop)`,
    ].join('\n'),
  );

  await new Promise<void>((resolve) => {
    let unfollow = (): void => {};
    const stop = (name: NodeJS.Signals) => {
      unfollow();
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      // A second signal while closing exits at once.
      process.once('SIGINT', () => process.exit(1));
      process.once('SIGTERM', () => process.exit(1));
      logger.info({ signal: name }, 'stopping the simulator');
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
    // npx passes no signal on: its end stops the simulator it started (src/cli/shutdown.ts).
    if (launchedByNpm()) unfollow = onParentGone(() => stop('SIGTERM'));
  });
  await sim.close();
  logger.flush();
  return 0;
}
