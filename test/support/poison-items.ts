import type { Pool } from 'pg';
import { readEnvelope } from '../../src/feed/envelope.js';
import { jsonText } from '../../src/feed/json-text.js';

/** `depth` objects inside each other: {a:{a:{…}}} (a flat object is depth 1). */
export function nested(depth: number): Record<string, unknown> {
  let value: Record<string, unknown> = {};
  for (let i = 1; i < depth; i++) value = { a: value };
  return value;
}

/**
 * `length` characters drawn from U+0800 to U+D7FF: three UTF-8 bytes for one
 * UTF-16 unit, the most bytes a length check in characters lets through, and
 * random enough that compression cannot shrink an index row.
 */
export function wide(random: () => number, length: number): string {
  const char = () => String.fromCharCode(0x800 + Math.floor(random() * (0xd800 - 0x800)));
  return Array.from({ length }, char).join('');
}

/**
 * The raw text the quarantine keeps for a served item: the item as served when
 * it is no envelope, the checked event (created_at normalised) when Postgres
 * refused it.
 */
export function quarantinedRaw(item: unknown): string {
  const envelope = readEnvelope(item);
  return envelope.ok ? JSON.stringify(envelope.event) : jsonText(item);
}

/**
 * Adds a trigger to a schema's events table that makes Postgres itself raise the
 * SQLSTATE an event names in `data.refuse` (a string): poison that no check in
 * feedsync knows about, for the safety net to find.
 */
export async function addRefusingTrigger(pool: Pick<Pool, 'query'>, schema: string): Promise<void> {
  const s = `"${schema}"`;
  await pool.query(`
    CREATE FUNCTION ${s}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF jsonb_typeof(NEW.data->'refuse') = 'string' THEN
        RAISE EXCEPTION 'refused by the test' USING ERRCODE = NEW.data->>'refuse';
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER refuse BEFORE INSERT ON ${s}.events FOR EACH ROW EXECUTE FUNCTION ${s}.refuse();`);
}
