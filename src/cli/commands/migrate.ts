import { Command } from 'commander';
import { action } from '../context.js';

export function migrateCommand(): Command {
  return new Command('migrate')
    .description(
      "Create or update the tables in DATABASE_SCHEMA, and with QUEUE_BACKEND=postgres the queues' schema (QUEUE_PREFIX in QUEUE_DATABASE_URL). Safe to run while another migrate runs.",
    )
    .addHelpText(
      'after',
      '\nPrints what it did on stdout; its log line goes to stderr.\n' +
        'Exit codes: 0 migrated (or already up to date), 1 runtime failure (Postgres), 2 configuration error.',
    )
    .action(
      action(
        async ({ config, logger }) => {
          const { storeFor } = await import('../../compose/parts.js');
          const { migrate } = await import('../../store/migrate.js');
          const store = storeFor(config, logger);
          try {
            const { applied } = await migrate(store);
            logger.info({ schema: config.database.schema, applied }, 'schema up to date');
            process.stdout.write(
              applied.length > 0
                ? `applied ${applied.join(', ')} in schema ${config.database.schema}\n`
                : `schema ${config.database.schema} already up to date\n`,
            );
          } finally {
            await store.close();
          }
          if (config.queues.backend === 'postgres') {
            const { pgQueuesOf } = await import('../../compose/parts.js');
            const { migrateQueues } = await import('../../queue/pg-queues.js');
            const queues = pgQueuesOf(config);
            const version = await migrateQueues(queues, config.database.connectTimeoutMs);
            logger.info({ schema: queues.schema, version }, "queues' schema up to date");
            process.stdout.write(`queues' schema ${queues.schema} at BullMQ's migration ${version}\n`);
          }
          return 0;
        },
        { logTo: process.stderr, keys: false },
      ),
    );
}
