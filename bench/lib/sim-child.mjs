// The simulator in a process of its own, so that it never shares a thread with
// what is measured. Prints its origin, then serves until stdin closes or a signal.
import { startSimulator } from '../../dist/simulator/index.js';
import { API_KEY } from './env.mjs';

// The bench's key is the default account's: key-less /_sim calls set its backlog.
// A fleet bench has a key per tenant: room for more accounts than the simulator's default.
// A JSON argument adds options of a bench's own ({"rateLimit": 5}).
const own = process.argv[2] ? JSON.parse(process.argv[2]) : {};
const sim = await startSimulator({ port: 0, backlog: 0, defaultKey: API_KEY, maxAccounts: 200_000, ...own });
process.stdout.write(`${JSON.stringify({ origin: sim.origin, baseUrl: sim.baseUrl })}\n`);
const stop = () => sim.close().finally(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
// The parent going away closes the pipe: never outlive it.
process.stdin.on('end', stop);
process.stdin.resume();
