/** The service simulator: a local stand-in for the email delivery service (DESIGN section 5). */

export { accountIdOf } from './account.js';
export { isLoopbackAddress } from './control.js';
export { DEFAULT_FAULTS } from './faults.js';
export { DEFAULT_LIMIT, MAX_LIMIT } from './feed.js';
export { startSimulator } from './server.js';
export type {
  AccountStats,
  Faults,
  Simulator,
  SimulatorAccount,
  SimulatorOptions,
  SimulatorStats,
} from './types.js';
export { RETRY_SCHEDULE_MS } from './webhook-deliveries.js';
