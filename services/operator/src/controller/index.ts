/** The operator's generic controller runtime: what reconcilers and the main wiring compose. */
export * from './clock.js';
export * from './errors.js';
export * from './events.js';
export * from './informers.js';
export * from './k8s-request.js';
export * from './leader-election.js';
export * from './lease-lock.js';
export * from './log.js';
export * from './lru.js';
export * from './manager.js';
export * from './metrics.js';
export * from './server.js';
export * from './shutdown.js';
export * from './workqueue.js';
