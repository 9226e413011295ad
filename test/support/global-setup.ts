import { ensureTestDatabase } from './test-database.js';

/** Once before the suite: the database the tests use exists (nothing else creates it). */
export default async function setup(): Promise<void> {
  await ensureTestDatabase();
}
