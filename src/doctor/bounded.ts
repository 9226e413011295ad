/**
 * `fn` over every item, at most `limit` at once, in the items' order. An item not
 * started by `deadline` (a time from performance.now()) gets `late(item)` instead:
 * a file of thousands of sources gives a report in bounded time, naming what it left.
 */
export async function mapBounded<T, R>(
  items: readonly T[],
  limit: number,
  deadline: number,
  fn: (item: T) => Promise<R>,
  late: (item: T) => R,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      const item = items[i] as T;
      results[i] = performance.now() >= deadline ? late(item) : await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
