export * from './admission-review.js';
export * from './handler-since.js';
export * from './instance-kinds.js';
export * from './k8s-validation.js';
export * from './keys.js';
export * from './names.js';
export * from './parse.js';
export * from './placement.js';
export * from './platform-namespace.js';
export * from './pools.js';
export * from './runtime.js';
export {
  formatErrors,
  jsonPathOf,
  MAX_ANNOTATION_LENGTH,
  MAX_NODE_SELECTOR_ENTRIES,
  MAX_TOLERATIONS,
  nodeIsolationSchema,
  sandboxIsolationSchema,
  TOLERATION_EFFECTS,
  TOLERATION_OPERATORS,
} from './schemas.js';
export * from './tenant.js';
export * from './tolerations.js';
export * from './types.js';
export * from './unisolated.js';
export * from './weak-sandboxes.js';
