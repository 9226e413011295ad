import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  NodeTracerProvider,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-node';
import type { TracingSettings } from '../config/tracing-settings.js';

/** How long the last spans may take to leave at exit: a collector that is down must not hold a CronJob run. */
const FLUSH_MS = 5_000;

/**
 * Starts the OpenTelemetry SDK: a Node tracer provider (its context manager carries the
 * active span across awaits), a batch processor and the OTLP/HTTP exporter to
 * `settings.url`. Loaded by the CLI only when tracing is configured. Returns the stop:
 * it flushes the spans left, for at most a few seconds.
 */
export function startTracing(settings: TracingSettings): () => Promise<void> {
  const provider = new NodeTracerProvider({
    // OTEL_RESOURCE_ATTRIBUTES (a pod's name, a cluster's) as the SDK reads it, under our service name.
    resource: detectResources({ detectors: [envDetector] }).merge(
      resourceFromAttributes({ 'service.name': settings.serviceName }),
    ),
    sampler: samplerOf(settings),
    // Every export ends within FLUSH_MS (OTEL_EXPORTER_OTLP_TIMEOUT is capped at it): a
    // request still open to a collector that accepts and never answers would otherwise
    // keep the process alive past the stop below, for the exporter's own 10 s or more.
    spanProcessors: [
      new BatchSpanProcessor(new OTLPTraceExporter({ url: settings.url, timeoutMillis: FLUSH_MS }), {
        exportTimeoutMillis: FLUSH_MS,
      }),
    ],
  });
  provider.register();
  return async () => {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      provider.shutdown().catch(() => {}),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, FLUSH_MS);
        timer.unref();
      }),
    ]);
    clearTimeout(timer);
  };
}

function samplerOf({ sampler, ratio }: TracingSettings): Sampler {
  const root = sampler.endsWith('always_on')
    ? new AlwaysOnSampler()
    : sampler.endsWith('always_off')
      ? new AlwaysOffSampler()
      : new TraceIdRatioBasedSampler(ratio);
  return sampler.startsWith('parentbased_') ? new ParentBasedSampler({ root }) : root;
}
