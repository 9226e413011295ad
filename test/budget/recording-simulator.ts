import { pino } from 'pino';
import type { Simulator, SimulatorOptions } from '../../src/simulator/index.js';
import { startTestSimulator } from '../support/simulator.js';

/** One answered /api request, as the simulator logged it when the response ended. */
export interface Answered {
  /** Milliseconds since the epoch. */
  time: number;
  route: string;
  account: string | undefined;
  status: number;
}

/** A simulator whose every answered /api request is kept, in order: what rates are measured from. Close it. */
export async function recordingSimulator(
  opts: SimulatorOptions,
): Promise<{ sim: Simulator; answered: Answered[] }> {
  const answered: Answered[] = [];
  const logger = pino(
    { level: 'debug' },
    {
      write: (line: string) => {
        const l = JSON.parse(line) as Partial<Answered> & { msg?: string };
        if (l.msg === 'request' && l.route?.includes('/api/'))
          answered.push({ time: l.time!, route: l.route, account: l.account, status: l.status! });
      },
    },
  );
  return { sim: await startTestSimulator({ ...opts, logger }), answered };
}

/** Requests a second over the span from the first to the last of `times` (ms): n − 1 gaps over their length. */
export function rateOf(times: readonly number[]): number {
  if (times.length < 2) return 0;
  const span = (times[times.length - 1]! - times[0]!) / 1000;
  return (times.length - 1) / span;
}

/** The feed requests of `account` among `answered`, by time. */
export function feedRequests(answered: readonly Answered[], account?: string): number[] {
  return answered
    .filter((a) => a.route === 'GET /api/events' && (account === undefined || a.account === account))
    .map((a) => a.time);
}
