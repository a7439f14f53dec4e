/**
 * The custom ajv formats the annotation schemas use (`format: 'k8s-qualified-name'`, ...), by name.
 * The generator registers these objects with ajv, and the generated validators import this module
 * and call the same `validate` functions.
 */
import { isDns1123Subdomain, isLabelValue, isQualifiedName } from './k8s-validation.js';

export const formats = {
  'k8s-qualified-name': { type: 'string', validate: isQualifiedName },
  'k8s-label-value': { type: 'string', validate: isLabelValue },
  'k8s-dns-subdomain': { type: 'string', validate: isDns1123Subdomain },
} as const;
