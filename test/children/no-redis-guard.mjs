// Preloaded (NODE_OPTIONS=--import) into a child run with REDIS_URL unset: every TCP
// connection the child opens to Redis's default port is told on stderr, so a test can
// say that nothing connected to the shared Redis without a listener of its own there.
import net from 'node:net';

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function (...args) {
  const first = Array.isArray(args[0]) ? args[0][0] : args[0];
  const port = typeof first === 'object' && first !== null ? first.port : first;
  if (Number(port) === 6379) process.stderr.write('\nREDIS CONNECTION OPENED\n');
  return connect.apply(this, args);
};
