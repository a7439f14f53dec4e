export * from './bootstrap.js';
export * from './build-info.js';
export * from './duration.js';
export * from './errors.js';
export * from './flags.js';
export * from './log.js';
export * from './metrics-auth.js';
export * from './version.js';
