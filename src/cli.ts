#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { registerCommands } from './cli/commands/index.js';

const program = new Command('feedsync')
  .description(
    "Keeps your Postgres in step with an email delivery service's events, and hands every update to BullMQ.",
  )
  .version('0.1.0')
  .showHelpAfterError()
  .exitOverride();

registerCommands(program);
// commander applies exitOverride to the program only; every subcommand needs it too.
const override = (command: Command): void => {
  for (const sub of command.commands) {
    sub.exitOverride().showHelpAfterError();
    override(sub);
  }
};
override(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (!(err instanceof CommanderError)) throw err;
  // Help and version are not errors; every other usage mistake is exit 2.
  const ok = ['commander.helpDisplayed', 'commander.version'].includes(err.code);
  process.exitCode = ok ? 0 : 2;
}
