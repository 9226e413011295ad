import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { secretsOf } from '../../src/config/secrets.js';
import { parseTracing } from '../../src/config/tracing-settings.js';

describe('tracing settings (the standard OTEL_* variables)', () => {
  it('off without an endpoint, or when disabled', () => {
    expect(loadConfig({}).tracing).toBeNull();
    expect(parseTracing({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' })).toBeNull();
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    expect(parseTracing({ ...endpoint, OTEL_SDK_DISABLED: 'true' })).toBeNull();
    expect(parseTracing({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' })).toBeNull();
  });

  it('on with an endpoint: the traces path, the service name and the sampler', () => {
    expect(parseTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })).toEqual({
      url: 'http://collector:4318/v1/traces',
      serviceName: 'feedsync',
      sampler: 'parentbased_always_on',
      ratio: 1,
    });
    expect(
      parseTracing({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://ignored:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://collector/custom/path',
        OTEL_SERVICE_NAME: 'sync-eu',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
      }),
    ).toEqual({
      url: 'https://collector/custom/path',
      serviceName: 'sync-eu',
      sampler: 'parentbased_traceidratio',
      ratio: 0.25,
    });
  });

  it('a wrong value stops the program with a message naming the variable', () => {
    const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    const cases: [Record<string, string>, RegExp][] = [
      [
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' },
        /^OTEL_EXPORTER_OTLP_ENDPOINT: must start with http/,
      ],
      [
        { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'not a url' },
        /^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: not a valid URL/,
      ],
      [{ ...on, OTEL_TRACES_SAMPLER: 'sometimes' }, /^OTEL_TRACES_SAMPLER: must be one of/],
      [{ ...on, OTEL_TRACES_SAMPLER_ARG: '1.5' }, /^OTEL_TRACES_SAMPLER_ARG: must be a number from 0 to 1/],
      [{ ...on, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, /^OTEL_EXPORTER_OTLP_PROTOCOL: .*http\/json/],
      [{ ...on, OTEL_TRACES_EXPORTER: 'zipkin' }, /^OTEL_TRACES_EXPORTER: must be otlp or none/],
    ];
    for (const [env, message] of cases) {
      expect(() => loadConfig(env)).toThrow(message);
    }
  });

  it('a password in the endpoint is a secret the logger scrubs', () => {
    const config = loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://user:s3cr3t-token@collector:4318' });
    expect(secretsOf(config)).toContain('s3cr3t-token');
  });
});
