import type { Command } from 'commander';
import { cursorCommand } from './cursor.js';
import { demoCommand } from './demo.js';
import { doctorCommand } from './doctor.js';
import { migrateCommand } from './migrate.js';
import { reconcileCommand } from './reconcile.js';
import { requeueCommand } from './requeue.js';
import { sendCommand } from './send.js';
import { serveWebhooksCommand } from './serve-webhooks.js';
import { simulatorCommand } from './simulator.js';
import { sourcesCommand } from './sources.js';
import { statusCommand } from './status.js';
import { suppressionsCommand } from './suppressions.js';
import { syncCommand } from './sync.js';
import { verifyCommand } from './verify.js';
import { webhooksCommand } from './webhooks.js';

/**
 * Adds every subcommand to the program: one file per command in this folder.
 * Command files import their heavy modules inside the action, so that `--help`
 * and a caught-up `sync --once` start fast.
 */
export function registerCommands(program: Command): void {
  const commands: (() => Command)[] = [
    migrateCommand,
    syncCommand,
    statusCommand,
    cursorCommand,
    reconcileCommand,
    verifyCommand,
    demoCommand,
    serveWebhooksCommand,
    webhooksCommand,
    sendCommand,
    suppressionsCommand,
    sourcesCommand,
    simulatorCommand,
    requeueCommand,
    doctorCommand,
  ];
  for (const make of commands) program.addCommand(make());
}
