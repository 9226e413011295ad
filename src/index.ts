/**
 * The library entry (`import … from 'feedsync'`): the webhook signature functions (both schemes),
 * the typed API client, and for embedding the worker's main loop (`runWorker`), the
 * sync of one source (`createSync`) and the webhook receiver.
 */
export { ServiceClient, type ServiceClientOptions } from './api/client.js';
export type * from './api/types.js';
export { loadConfig } from './config/config.js';
export type { Config } from './config/config-type.js';
export { ApiError, AuthError, ConfigError, FeedsyncError, PageError } from './errors.js';
export type { Outcome } from './sync/scheduler.js';
export { createSync, type OnceResult, type RunResult, type Sync, type SyncOptions } from './sync/sync.js';
export { runWorker, type WorkerHooks, type WorkerOptions, type WorkerResult } from './sync/worker.js';
export { signWebhookPayload, type VerifyOptions, verifyWebhookSignature } from './webhooks/signature.js';
export {
  type StandardHeaders,
  signStandardWebhook,
  verifyStandardWebhook,
} from './webhooks/standard-signature.js';
export { startWebhookService } from './webhooks/webhook-service.js';
