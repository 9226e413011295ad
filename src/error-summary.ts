/**
 * The parts of an error that are safe to show anywhere: a shortened message, the
 * name of a failed Redis command, the stack's frames. An error of ioredis also holds
 * the command's arguments (BullMQ's Lua source, job data with recipients' addresses)
 * and earlier errors holding the same: those are never taken.
 */

/** Longest message kept (a Redis script error can quote much of the script). */
const MAX_MESSAGE = 300;

export function shorten(text: string, max = MAX_MESSAGE): string {
  return text.length > max ? `${text.slice(0, max)}… (${text.length - max} more characters)` : text;
}

/** The name of the failed command: ioredis's `err.command.name`, or a RedisError's `command`. */
export function commandName(err: Error): string | null {
  const command = (err as { command?: unknown }).command;
  const name = typeof command === 'string' ? command : (command as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' ? name.slice(0, 64) : null;
}

/** The `    at …` lines of a stack, without the message lines above them. */
export function frames(stack: string): string {
  return stack
    .split('\n')
    .filter((line) => /^\s+at /.test(line))
    .join('\n');
}
