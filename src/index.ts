export type * from './api/types.js';
export { type Config, loadConfig } from './config.js';
export { ApiError, AuthError, ConfigError, FeedsyncError, PageError } from './errors.js';
export { signWebhookPayload, type VerifyOptions, verifyWebhookSignature } from './webhooks/signature.js';
