// Where a profile's frame comes from, for bench/profile-top.mjs and bench/heap-top.mjs.
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** node_modules/<package>, node:<module>, or the path below the project, for grouping. */
export function place(url) {
  if (!url) return '(native/internal)';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1];
  if (url.startsWith('node:')) return url;
  const own = /\/(dist|bench|src)\/(.*)$/.exec(url);
  return own ? `${own[1]}/${own[2]}` : url;
}

/** Whether a place is our own code: a source file, or a compiled one. */
export const isOwn = (where) => /^(dist|src)\//.test(where);

const maps = new Map();
function mapOf(url) {
  if (!maps.has(url)) {
    const path = url.startsWith('file://') ? fileURLToPath(url) : url;
    maps.set(
      url,
      existsSync(`${path}.map`)
        ? { dir: dirname(path), map: new SourceMap(JSON.parse(readFileSync(`${path}.map`, 'utf8'))) }
        : null,
    );
  }
  return maps.get(url);
}

/**
 * The CLI is a bundle (dist/bin/): a frame of it is pointed, through the source map
 * beside it, at the file it came from, our own or a package's. Changes the frame.
 */
export function unbundle(callFrame) {
  const found = callFrame.url?.includes('/dist/bin/') ? mapOf(callFrame.url) : null;
  const entry = found?.map.findEntry(callFrame.lineNumber, callFrame.columnNumber);
  if (entry?.originalSource) {
    callFrame.url = resolve(found.dir, entry.originalSource);
    callFrame.lineNumber = entry.originalLine;
  }
}
