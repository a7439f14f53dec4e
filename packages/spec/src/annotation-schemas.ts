/**
 * JSON Schemas of the two annotations. Structural rules live here; the messages are written for
 * the platform team reading a Kubernetes Event, not for a schema expert.
 *
 * Nothing here compiles them: `codegen/generate-validators.ts` turns them into plain functions at
 * build time (ajv standalone code, src/generated/validators.ts), so no process loads ajv's compiler.
 * Change a schema, then `make generate` (`make build` runs it).
 */
import { DNS1123_SUBDOMAIN_RULE, LABEL_VALUE_RULE, QUALIFIED_NAME_RULE } from './k8s-validation.js';
import { RUNTIME_LEVELS } from './types.js';

/** Largest annotation text accepted (bytes of UTF-16 code units; Kubernetes caps all annotations at 256 KiB). */
export const MAX_ANNOTATION_LENGTH = 16 * 1024;
export const MAX_NODE_SELECTOR_ENTRIES = 32;
export const MAX_TOLERATIONS = 32;
export const TOLERATION_EFFECTS = ['', 'NoSchedule', 'PreferNoSchedule', 'NoExecute'] as const;
export const TOLERATION_OPERATORS = ['Exists', 'Equal'] as const;

const KEYLESS = 'must be Exists when key is empty (such a toleration matches every taint)';
const SECONDS = 'must be NoExecute when tolerationSeconds is set';

const tolerationSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    key: {
      type: 'string',
      anyOf: [{ const: '' }, { format: 'k8s-qualified-name' }],
      errorMessage: `must be empty or ${QUALIFIED_NAME_RULE}`,
    },
    operator: {
      enum: TOLERATION_OPERATORS,
      errorMessage: 'must be one of Exists, Equal (empty means Equal)',
    },
    value: { type: 'string', format: 'k8s-label-value', errorMessage: `must be ${LABEL_VALUE_RULE}` },
    effect: {
      enum: TOLERATION_EFFECTS,
      errorMessage: 'must be one of NoSchedule, PreferNoSchedule, NoExecute (or empty for all effects)',
    },
    tolerationSeconds: { type: 'integer', errorMessage: 'must be an integer number of seconds' },
  },
  allOf: [
    {
      if: { required: ['operator'], properties: { operator: { const: 'Exists' } } },
      // biome-ignore lint/suspicious/noThenProperty: JSON Schema keyword
      then: { properties: { value: { const: '', errorMessage: 'must be empty when operator is Exists' } } },
    },
    {
      if: { not: { required: ['key'], properties: { key: { type: 'string', minLength: 1 } } } },
      // biome-ignore lint/suspicious/noThenProperty: JSON Schema keyword
      then: {
        required: ['operator'],
        properties: { operator: { const: 'Exists', errorMessage: KEYLESS } },
        errorMessage: { required: { operator: `operator ${KEYLESS}` } },
      },
    },
    {
      if: { required: ['tolerationSeconds'] },
      // biome-ignore lint/suspicious/noThenProperty: JSON Schema keyword
      then: {
        required: ['effect'],
        properties: { effect: { const: 'NoExecute', errorMessage: SECONDS } },
        errorMessage: { required: { effect: `effect ${SECONDS}` } },
      },
    },
  ],
  errorMessage: { type: 'must be an object' },
} as const;

export const nodeIsolationSchema = {
  $id: 'https://kubeplus.io/schemas/node-isolation.json',
  type: 'object',
  additionalProperties: false,
  properties: {
    nodeSelector: {
      type: 'object',
      maxProperties: MAX_NODE_SELECTOR_ENTRIES,
      propertyNames: { format: 'k8s-qualified-name' },
      additionalProperties: { type: 'string', format: 'k8s-label-value', errorMessage: `must be ${LABEL_VALUE_RULE}` },
      errorMessage: {
        type: 'must be an object of label keys to label values',
        maxProperties: `must have at most ${MAX_NODE_SELECTOR_ENTRIES} entries`,
      },
    },
    tolerations: {
      type: 'array',
      maxItems: MAX_TOLERATIONS,
      items: tolerationSchema,
      errorMessage: {
        type: 'must be an array of tolerations',
        maxItems: `must have at most ${MAX_TOLERATIONS} entries`,
      },
    },
  },
  errorMessage: {
    type: 'must be a JSON object with nodeSelector and/or tolerations',
    additionalProperties: 'only nodeSelector and tolerations are allowed',
  },
} as const;

export const sandboxIsolationSchema = {
  $id: 'https://kubeplus.io/schemas/sandbox-isolation.json',
  type: 'object',
  additionalProperties: false,
  required: ['minRuntimeClass'],
  properties: {
    minRuntimeClass: { enum: RUNTIME_LEVELS, errorMessage: `must be one of ${RUNTIME_LEVELS.join(', ')}` },
    enforce: { type: 'boolean', default: true, errorMessage: 'must be true or false' },
    // An existing platform RuntimeClass to use instead of a generated one (types.ts SandboxIsolationSpec).
    runtimeClassName: {
      type: 'string',
      format: 'k8s-dns-subdomain',
      errorMessage: `must name a RuntimeClass: ${DNS1123_SUBDOMAIN_RULE}`,
    },
  },
  errorMessage: {
    type: 'must be a JSON object with minRuntimeClass and optionally enforce and runtimeClassName',
    additionalProperties: 'only minRuntimeClass, enforce and runtimeClassName are allowed',
    required: { minRuntimeClass: 'minRuntimeClass is required (one of runc, runsc, kata)' },
  },
} as const;
