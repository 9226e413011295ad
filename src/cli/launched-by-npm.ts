/**
 * Whether npm started this process (`npx feedsync`, `npm exec`: npm sets `npm_command`).
 * npx ends on SIGTERM or SIGINT without passing the signal on, so a long-running command
 * follows it: when npx is gone, it stops as on SIGTERM (src/cli/shutdown.ts).
 */
export function launchedByNpm(env: Record<string, string | undefined> = process.env): boolean {
  return env.npm_command !== undefined;
}
