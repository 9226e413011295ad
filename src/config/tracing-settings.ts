import { ConfigError } from '../errors.js';

/** Where and how the CLI exports its spans; null when OpenTelemetry is not configured. */
export interface TracingSettings {
  /** The OTLP/HTTP traces URL: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT + `/v1/traces`. */
  readonly url: string;
  /** OTEL_SERVICE_NAME. Default `feedsync`. */
  readonly serviceName: string;
  /** OTEL_TRACES_SAMPLER. Default `parentbased_always_on`. */
  readonly sampler: Sampler;
  /** OTEL_TRACES_SAMPLER_ARG: the ratio of the `*traceidratio` samplers, 0 to 1. Default 1. */
  readonly ratio: number;
}

const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type Sampler = (typeof SAMPLERS)[number];

/** The standard OpenTelemetry variables feedsync reads itself; the SDK reads the others (headers, timeout). */
const TRACING_VARIABLES = [
  'OTEL_SDK_DISABLED',
  'OTEL_TRACES_EXPORTER',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_PROTOCOL',
  'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
  'OTEL_SERVICE_NAME',
  'OTEL_TRACES_SAMPLER',
  'OTEL_TRACES_SAMPLER_ARG',
] as const;

/**
 * Tracing is on when an OTLP endpoint is set, as for any instrumented service, and off
 * (null) otherwise, or with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
 * feedsync ships the OTLP/HTTP exporter that sends JSON: another protocol or exporter
 * stops the program with a message naming the variable.
 */
export function parseTracing(env: Record<string, string | undefined>): TracingSettings | null {
  const get = (name: (typeof TRACING_VARIABLES)[number]): string | undefined => {
    const value = env[name]?.trim();
    return value === '' ? undefined : value;
  };
  if (get('OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return null;
  const exporter = get('OTEL_TRACES_EXPORTER');
  if (exporter === 'none') return null;
  if (exporter !== undefined && exporter !== 'otlp')
    throw new ConfigError('OTEL_TRACES_EXPORTER: must be otlp or none');
  const own = get('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const base = get('OTEL_EXPORTER_OTLP_ENDPOINT');
  if (own === undefined && base === undefined) return null;
  const url = own === undefined ? `${base!.replace(/\/+$/, '')}/v1/traces` : own;
  checkEndpoint(
    own === undefined ? 'OTEL_EXPORTER_OTLP_ENDPOINT' : 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    url,
  );
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL'] as const) {
    const protocol = get(name);
    if (protocol !== undefined && protocol !== 'http/json')
      throw new ConfigError(`${name}: feedsync exports OTLP over HTTP as JSON: must be http/json, or unset`);
  }
  const sampler = get('OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on';
  if (!(SAMPLERS as readonly string[]).includes(sampler))
    throw new ConfigError(`OTEL_TRACES_SAMPLER: must be one of ${SAMPLERS.join(', ')}`);
  const arg = get('OTEL_TRACES_SAMPLER_ARG');
  const ratio = arg === undefined ? 1 : Number(arg);
  if (!/^\d*\.?\d+$/.test(arg ?? '1') || !(ratio >= 0 && ratio <= 1))
    throw new ConfigError('OTEL_TRACES_SAMPLER_ARG: must be a number from 0 to 1');
  return {
    url,
    serviceName: get('OTEL_SERVICE_NAME') ?? 'feedsync',
    sampler: sampler as Sampler,
    ratio,
  };
}

function checkEndpoint(name: string, url: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigError(`${name}: not a valid URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new ConfigError(`${name}: must start with http:// or https://`);
}
