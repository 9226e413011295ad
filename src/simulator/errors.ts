/** The stable codes of every refusal the simulator answers with. */
export type SimErrorCode =
  | 'invalid_json'
  | 'invalid_body'
  | 'missing_field'
  | 'invalid_field'
  | 'invalid_header'
  | 'unsupported_media_type'
  | 'payload_too_large'
  | 'missing_api_key'
  | 'invalid_api_key'
  | 'forbidden'
  | 'not_found'
  | 'method_not_allowed'
  | 'webhook_not_found'
  | 'delivery_not_found'
  | 'account_not_found'
  | 'too_many_accounts'
  | 'unknown_event_id'
  | 'invalid_limit'
  | 'invalid_type'
  | 'idempotency_conflict'
  | 'backlog_locked'
  | 'rate_limited'
  | 'service_unavailable'
  | 'internal_error';

/** A refusal: answered as `{error: {code, message}}` with this status and headers. */
export class SimError extends Error {
  readonly status: number;
  readonly code: SimErrorCode;
  readonly headers: Readonly<Record<string, string>>;

  constructor(status: number, code: SimErrorCode, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'SimError';
    this.status = status;
    this.code = code;
    this.headers = headers;
  }
}

export const badRequest = (code: SimErrorCode, message: string): SimError => new SimError(400, code, message);
