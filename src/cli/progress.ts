import type { CommitInfo } from '../sync/catch-up.js';

/**
 * A one-line progress display on a terminal (pages, events, events/s), redrawn
 * at most twice a second, and drawn a last time by the first done(): a later one (the
 * command's own cleanup, after the run's last log lines) draws nothing. On anything else
 * it does nothing: the command's summary line says enough.
 */
export function progressReporter(stream: NodeJS.WriteStream = process.stderr): {
  onCommit: (info: CommitInfo) => void;
  done: () => void;
} {
  if (!stream.isTTY) return { onCommit: () => {}, done: () => {} };
  const started = performance.now();
  let pages = 0;
  let events = 0;
  let duplicates = 0;
  let lastDraw = 0;
  let finished = false;
  const draw = (): void => {
    const seconds = (performance.now() - started) / 1000;
    const rate = seconds > 0 ? Math.round(events / seconds) : 0;
    stream.write(`\r\x1b[Kpages ${pages}  events ${events}  duplicates ${duplicates}  ${rate} events/s`);
  };
  return {
    onCommit(info) {
      pages += info.pages;
      events += info.result.inserted.length;
      duplicates += info.result.duplicates;
      const now = performance.now();
      if (now - lastDraw > 500) {
        lastDraw = now;
        draw();
      }
    },
    done() {
      if (finished) return;
      finished = true;
      if (pages > 0) {
        draw();
        stream.write('\n');
      }
    },
  };
}
