import type { Command } from 'commander';

/**
 * Adds every subcommand to the program: one file per command in this folder.
 * Command files import their heavy modules inside the action, so that `--help`
 * and a caught-up `sync --once` start fast.
 */
export function registerCommands(program: Command): void {
  for (const make of []) program.addCommand(make);
}
