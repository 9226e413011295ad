import { createServer } from 'node:http';

/**
 * A feed on node:http of `total` events of about `eventBytes` each (the data carries
 * padding), served in pages of `limit`, made on the fly: nothing of the feed is held.
 * `type` decides whether the worker's relay sees them: `email.opened` is stored
 * without a queue, `email.delivered` goes to one.
 */
export async function startPaddedFeed({ total, eventBytes, limit, type }) {
  const pad = 'x'.repeat(Math.max(0, eventBytes - 160));
  const idAt = (n) => `ev_${String(n).padStart(8, '0')}`;
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://feed');
    const after = url.searchParams.get('after');
    const from = after === null ? 1 : Number(after.slice(3)) + 1;
    const to = Math.min(total, from + limit - 1);
    const events = [];
    for (let n = from; n <= to; n++) {
      events.push(
        `{"id":"${idAt(n)}","type":"${type}","created_at":"2024-05-01T00:00:00Z","data":{"email_id":"em_${n}","to":[],"pad":"${pad}"}}`,
      );
    }
    const next = to >= from ? idAt(to) : after;
    const body = `{"data":[${events.join(',')}],"next_after":${JSON.stringify(next)}}`;
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${server.address().port}/api`,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
