import { type ChildResult, runCli } from '../../support/processes.js';

/** Runs the built CLI to its end and says how long it took, start-up included. */
export async function timedCli(
  args: readonly string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
): Promise<ChildResult & { ms: number }> {
  const started = performance.now();
  const res = await runCli(args, env, timeoutMs);
  return { ...res, ms: Math.round(performance.now() - started) };
}
