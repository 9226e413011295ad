/**
 * JSON helpers that never recurse. JSON.parse takes any depth, but JSON.stringify
 * (and any walk written as a recursion) runs out of stack a few thousand levels
 * down: an event nested that deep must be measured and kept raw without a
 * RangeError.
 */

/** A piece of text to emit as is, between values. */
class Text {
  constructor(readonly text: string) {}
}
const COMMA = new Text(',');
const CLOSE_ARRAY = new Text(']');
const CLOSE_OBJECT = new Text('}');

/**
 * JSON.stringify of a parsed JSON value, the same text for any depth: the
 * built-in first, a loop with its own stack when that runs out of call stack.
 */
export function jsonText(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    return stringifyWithoutRecursion(value);
  }
}

function stringifyWithoutRecursion(root: unknown): string {
  const out: string[] = [];
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const v = stack.pop();
    if (v instanceof Text) {
      out.push(v.text);
    } else if (Array.isArray(v)) {
      out.push('[');
      stack.push(CLOSE_ARRAY);
      for (let i = v.length - 1; i >= 0; i--) {
        stack.push(v[i] === undefined ? null : v[i]);
        if (i > 0) stack.push(COMMA);
      }
    } else if (typeof v === 'object' && v !== null) {
      const record = v as Record<string, unknown>;
      const keys = Object.keys(record).filter((k) => record[k] !== undefined);
      out.push('{');
      stack.push(CLOSE_OBJECT);
      for (let i = keys.length - 1; i >= 0; i--) {
        const key = keys[i]!;
        stack.push(record[key], new Text(`${JSON.stringify(key)}:`));
        if (i > 0) stack.push(COMMA);
      }
    } else {
      out.push(JSON.stringify(v) ?? 'null');
    }
  }
  return out.join('');
}

/**
 * Whether a parsed JSON value nests arrays and objects deeper than `limit` (a
 * bare object is depth 1). Stops at the first path past the limit. Two parallel
 * stacks rather than one of pairs: this runs on every event of every page.
 */
export function nestedDeeperThan(root: unknown, limit: number): boolean {
  if (typeof root !== 'object' || root === null) return false;
  const values: object[] = [root];
  const depths: number[] = [1];
  while (values.length > 0) {
    const v = values.pop()!;
    const depth = depths.pop()!;
    if (depth > limit) return true;
    if (Array.isArray(v)) {
      for (const child of v) {
        if (typeof child === 'object' && child !== null) {
          values.push(child);
          depths.push(depth + 1);
        }
      }
    } else {
      const record = v as Record<string, unknown>;
      for (const key in record) {
        const child = record[key];
        if (typeof child === 'object' && child !== null) {
          values.push(child);
          depths.push(depth + 1);
        }
      }
    }
  }
  return false;
}
