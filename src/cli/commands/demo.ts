import { Command } from 'commander';
import { action } from '../context.js';

export function demoCommand(): Command {
  return new Command('demo')
    .description(
      'Show the main job end to end: a simulator in this process, some mail, a sync into the local Postgres ' +
        '(schema feedsync_demo, made afresh) and Redis (prefix feedsync-demo), and what landed.',
    )
    .action(
      action(async ({ config, logger }) => {
        const { runDemo } = await import('../demo.js');
        // The demo speaks through its own lines; the logger says only what went wrong.
        return runDemo(config, logger.child({ module: 'demo' }, { level: 'warn' }), (line) =>
          console.log(line),
        );
      }),
    );
}
