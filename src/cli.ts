#!/usr/bin/env -S node --liftoff-only --heap-growing-percent=50
// Node takes these V8 flags at start, from this line when `feedsync` runs as a command
// (npx feedsync, the package's bin) and from the image's ENTRYPOINT. Both only lower the
// cost of a run; `node dist/bin/feedsync.js` without them works the same, and gets the
// second one set below.
// - --liftoff-only: undici parses HTTP with llhttp, compiled to WebAssembly. After the
//   first response, V8's optimizing tier recompiles llhttp's parser (one large state
//   machine) in the background: about 35 MB, and 150-200 ms that a short run then waits
//   for before it can exit. The baseline tier parses a page's headers just as fast
//   (docs/BENCHMARKS.md, cold start).
// - --heap-growing-percent=50: V8 lets the old generation grow to four times what
//   survived the last full collection before collecting again; during a catch-up that
//   pushes the worker's RSS past 200 MB. Growing it by half keeps the peak near 150 MB
//   at no measurable cost in rate (docs/BENCHMARKS.md, Memory).
import { setFlagsFromString } from 'node:v8';
import { Command, CommanderError } from 'commander';
import { registerCommands } from './cli/commands/index.js';

// Started as `node dist/bin/feedsync.js` (npm scripts, an image of one's own), Node reads no
// shebang: the growth limit is set here instead, unless node was given one. V8 reads it
// after each full collection, so it takes effect from the first; Node's documentation
// warns that flags changed at run time may do nothing, and this one was measured to work
// (1,000 events of 200 kB: peak RSS 290 -> 193 MiB; docs/BENCHMARKS.md, Memory with
// events that reach the relay).
const nodeFlags = `${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS ?? ''}`;
if (!nodeFlags.includes('--heap-growing-percent')) setFlagsFromString('--heap-growing-percent=50');

// A reader that goes away (`feedsync … | head`) is not a failure of the command: the rest
// of the output is dropped and the exit code stays the command's own (2 for a usage error).
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE' && err.code !== 'ERR_STREAM_DESTROYED') throw err;
  });
}

const program = new Command('feedsync')
  .description(
    "Keeps your Postgres in step with an email delivery service's events, and hands every update to BullMQ.",
  )
  .version('0.1.0')
  .addHelpText(
    'after',
    '\nExit codes: 0 success, 1 runtime failure, 2 usage or configuration error, 3 the service rejected\n' +
      'the key, 4 (sync --once) not caught up: stopped at SYNC_ONCE_MAX_MS, what it read kept, 5 (sync)\n' +
      'another account\'s feed under a source, nothing of it stored. "feedsync help <command>" (or\n' +
      '<command> --help) says what each means for that command.',
  )
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
  await program.parseAsync(helpAsFlag(program, process.argv));
} catch (err) {
  if (err instanceof CommanderError) {
    // Help asked for (`--help`, `help`, `help sync`) and version are not errors; help shown
    // because a command was incomplete (`cursor` alone) is, like every other usage mistake: exit 2.
    const asked =
      ['commander.helpDisplayed', 'commander.version'].includes(err.code) ||
      (err.code === 'commander.help' && err.exitCode === 0);
    process.exitCode = asked ? 0 : 2;
  } else {
    // Commands report their own failures; whatever escapes them is still one line, not a stack.
    process.stderr.write(`feedsync: ${(err as Error)?.message ?? String(err)}\n`);
    process.exitCode = 1;
  }
}

/**
 * `help cursor set` as `cursor set --help`: commander's help command takes one word and
 * would print the `cursor` group's help for a nested command. A name that is no command
 * (`help nosuch`, `help cursor nosuch`) is run as the command itself, so commander says
 * "unknown command" before the usage, as it does for `feedsync nosuch`.
 */
function helpAsFlag(program: Command, argv: readonly string[]): string[] {
  const [node = '', script = '', first, ...rest] = argv;
  if (first !== 'help' || rest.length === 0) return [...argv];
  let command = program;
  for (const [i, word] of rest.entries()) {
    const sub = command.commands.find((c) => c.name() === word || c.aliases().includes(word));
    if (!sub) return [node, script, ...rest.slice(0, i + 1)];
    command = sub;
  }
  return rest.length < 2 ? [...argv] : [node, script, ...rest, '--help'];
}
