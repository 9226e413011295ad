/**
 * The library entry (`import … from 'feedsync'`): the webhook signature functions,
 * the typed API client, and the sync worker and webhook receiver for embedding.
 */
export { ServiceClient, type ServiceClientOptions } from './api/client.js';
export type * from './api/types.js';
export { type Config, loadConfig } from './config/config.js';
export { ApiError, AuthError, ConfigError, FeedsyncError, PageError } from './errors.js';
export { createSync, type RunResult, type Sync, type SyncOptions } from './sync/sync.js';
export { signWebhookPayload, type VerifyOptions, verifyWebhookSignature } from './webhooks/signature.js';
export { startWebhookService } from './webhooks/webhook-service.js';
