import { readFileSync } from 'node:fs';
import {
  AdmissionregistrationV1Api,
  type KubeConfig,
  type V1MutatingWebhook,
  type V1MutatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { isApiStatus } from './node-api.js';
import { holdEntryPath, webhookEntryPath } from './repo.js';

export const DEFAULT_WEBHOOK_CONFIGURATION_NAME = 'kubeplus-node-isolation';

/** The webhooks[] entry the Helm chart also uses (deploy/.../charts/webhook/files/webhook-entry.json). */
export function loadWebhookEntry(path = webhookEntryPath()): Omit<V1MutatingWebhook, 'clientConfig'> {
  const entry = JSON.parse(readFileSync(path, 'utf8')) as V1MutatingWebhook;
  if (typeof entry.name !== 'string' || !Array.isArray(entry.rules)) {
    throw new Error(`${path}: not a MutatingWebhook entry (needs name and rules)`);
  }
  if ('clientConfig' in entry) {
    throw new Error(`${path}: must not carry clientConfig (it is per installation: service or url, and caBundle)`);
  }
  return entry;
}

export interface WebhookRegistration {
  /** https URL the API server calls. */
  url: string;
  /** PEM of the CA that signed the webhook's serving certificate. */
  caPem: string;
  /** MutatingWebhookConfiguration name (default kubeplus-node-isolation). */
  name?: string;
  /** Alternative entry file (default: the chart's). */
  entryPath?: string;
  /**
   * Also register the hold entry (the chart's files/hold-entry.json, issue 35) first, at the URL's
   * `/hold` beside `/mutate/pods`; `releaseNamespace` is added to the names it never holds, as the
   * chart adds its release namespace.
   */
  hold?: { releaseNamespace?: string };
}

/** The hold's webhooks[] entry as the chart renders it (its NotIn list plus the release namespace). */
export function loadHoldEntry(
  releaseNamespace?: string,
  path = holdEntryPath(),
): Omit<V1MutatingWebhook, 'clientConfig'> {
  const entry = JSON.parse(readFileSync(path, 'utf8')) as V1MutatingWebhook;
  if (typeof entry.name !== 'string' || !Array.isArray(entry.rules)) {
    throw new Error(`${path}: not a MutatingWebhook entry (needs name and rules)`);
  }
  if (releaseNamespace !== undefined) {
    for (const e of entry.namespaceSelector?.matchExpressions ?? []) {
      if (e.key === 'kubernetes.io/metadata.name' && e.operator === 'NotIn')
        e.values = [...(e.values ?? []), releaseNamespace];
    }
  }
  return entry;
}

/** The MutatingWebhookConfiguration for a webhook reachable at `url`, from the chart's entry file. */
export function mutatingWebhookConfiguration(reg: WebhookRegistration): V1MutatingWebhookConfiguration {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name: reg.name ?? DEFAULT_WEBHOOK_CONFIGURATION_NAME },
    webhooks: [
      ...(reg.hold === undefined
        ? []
        : [
            {
              ...loadHoldEntry(reg.hold.releaseNamespace),
              clientConfig: {
                url: reg.url.replace(/\/mutate\/pods$/, '/hold'),
                caBundle: Buffer.from(reg.caPem, 'utf8').toString('base64'),
              },
            },
          ]),
      {
        ...loadWebhookEntry(reg.entryPath),
        clientConfig: { url: reg.url, caBundle: Buffer.from(reg.caPem, 'utf8').toString('base64') },
      },
    ],
  };
}

/** Creates (or replaces) the MutatingWebhookConfiguration; returns what the API server stored. */
export async function registerWebhook(
  kc: KubeConfig,
  reg: WebhookRegistration,
): Promise<V1MutatingWebhookConfiguration> {
  const api = kc.makeApiClient(AdmissionregistrationV1Api);
  const body = mutatingWebhookConfiguration(reg);
  const name = body.metadata?.name as string;
  try {
    return await api.createMutatingWebhookConfiguration({ body });
  } catch (error) {
    if (!isApiStatus(error, 409)) throw error;
    const current = await api.readMutatingWebhookConfiguration({ name });
    return api.replaceMutatingWebhookConfiguration({
      name,
      body: { ...body, metadata: { ...body.metadata, resourceVersion: current.metadata?.resourceVersion } },
    });
  }
}

export async function unregisterWebhook(kc: KubeConfig, name = DEFAULT_WEBHOOK_CONFIGURATION_NAME): Promise<void> {
  try {
    await kc.makeApiClient(AdmissionregistrationV1Api).deleteMutatingWebhookConfiguration({ name });
  } catch (error) {
    if (!isApiStatus(error, 404)) throw error;
  }
}
