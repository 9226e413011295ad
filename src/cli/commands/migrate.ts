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
          const { queueStoreFor } = await import('../../compose/queue-store.js');
          // Nothing to migrate when the queues are in Redis.
          const queues = await queueStoreFor(config).migrate(config.database.connectTimeoutMs);
          if (queues) {
            logger.info(queues, "queues' schema up to date");
            process.stdout.write(`queues' schema ${queues.schema} at BullMQ's migration ${queues.version}\n`);
          }
          return 0;
        },
        { logTo: process.stderr, keys: false },
      ),
    );
}
