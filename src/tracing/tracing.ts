import {
  type Attributes,
  type Link,
  type Span,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from '@opentelemetry/api';

export type { Attributes, Link, Span };
export { SpanKind };

// The API alone: until an SDK registers a tracer provider (the CLI's start.ts when
// OTEL_EXPORTER_OTLP_ENDPOINT is set, or an application that embeds feedsync and runs
// its own), every span is the API's no-op and costs an object and a call. Spans are per
// request, commit, batch or job, never per event of a page.
const tracer = trace.getTracer('feedsync');

export interface SpanOptions {
  kind?: SpanKind;
  /** Spans this one follows from without being their child: a job's link to its commit. */
  links?: Link[];
}

/**
 * Runs `fn` inside a span named `name`, the active span's child. The span ends when
 * `fn` settles; a throw marks it as an error with the error's code or name only (a
 * message can quote a value the span must not carry). Attributes never hold a key, a
 * secret, an address or event data: counts, names of sources and queues, statuses.
 */
export function inSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
  opts: SpanOptions = {},
): Promise<T> {
  return tracer.startActiveSpan(
    name,
    { attributes, kind: opts.kind ?? SpanKind.INTERNAL, ...(opts.links ? { links: opts.links } : {}) },
    async (span) => {
      try {
        return await fn(span);
      } catch (err) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: errorLabel(err) });
        throw err;
      } finally {
        span.end();
      }
    },
  );
}

/** The error's stable code, else its class name: what a span may say of a failure. */
function errorLabel(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(code)) return code;
  return err instanceof Error ? err.name : 'error';
}

/**
 * The span as a job's trace metadata (BullMQ's `telemetry.metadata`, the carrier
 * `bullmq-otel` uses: a JSON object of W3C trace-context headers), or undefined when it
 * is not sampled: a link to a span nobody exports would point nowhere.
 */
export function carrierOf(span: Span): string | undefined {
  const ctx = span.spanContext();
  if ((ctx.traceFlags & TraceFlags.SAMPLED) === 0) return undefined;
  return JSON.stringify({ traceparent: `00-${ctx.traceId}-${ctx.spanId}-01` });
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A link to the span a job's metadata names; none when it names none (a job rebuilt from the outbox). */
export function linksFrom(metadata: unknown): Link[] {
  if (typeof metadata !== 'string' || metadata.length > 512) return [];
  let carrier: unknown;
  try {
    carrier = JSON.parse(metadata);
  } catch {
    return [];
  }
  const header = (carrier as { traceparent?: unknown } | null)?.traceparent;
  const m = typeof header === 'string' ? TRACEPARENT.exec(header) : null;
  if (!m || /^0+$/.test(m[1]!) || /^0+$/.test(m[2]!)) return [];
  return [
    {
      context: { traceId: m[1]!, spanId: m[2]!, traceFlags: Number.parseInt(m[3]!, 16), isRemote: true },
    },
  ];
}
