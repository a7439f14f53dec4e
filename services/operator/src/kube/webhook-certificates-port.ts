/**
 * The webhook-certificates controller's API calls on @kubernetes/client-node: read the Secret
 * (404 → undefined), merge-patch its data and annotations with its resourceVersion as a
 * precondition (409 if it changed since it was read; a removed key is patched to null), and
 * replace the webhook configuration with new caBundles (its resourceVersion, from the cache,
 * makes that conditional too). RBAC: secrets get/patch and mutatingwebhookconfigurations
 * update, each on the one named object the chart grants (the configuration is read from the
 * list/watch cache, never with a GET).
 */
import { httpStatusOf } from '@kubeplus-isolation/service';
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  type KubeConfig,
  PatchStrategy,
  type V1MutatingWebhookConfiguration,
} from '@kubernetes/client-node';
import type { SecretContents } from '../controllers/webhook-certificates/execute.js';
import type {
  StoredSecret,
  WebhookCertificatesPort,
  WebhookConfigurationLike,
} from '../controllers/webhook-certificates/reconciler.js';
import { requestOptions } from './request.js';

export const FIELD_MANAGER = 'kubeplus-isolation-operator';

function decode(data: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(data ?? {})) out[k] = Buffer.from(v, 'base64').toString('utf8');
  return out;
}

export function kubeWebhookCertificatesPort(kc: KubeConfig): WebhookCertificatesPort {
  const core = kc.makeApiClient(CoreV1Api);
  const admission = kc.makeApiClient(AdmissionregistrationV1Api);
  return {
    async readSecret(namespace, name): Promise<StoredSecret | undefined> {
      try {
        const secret = await core.readNamespacedSecret({ namespace, name });
        return {
          data: decode(secret.data),
          annotations: { ...(secret.metadata?.annotations ?? {}) },
          resourceVersion: secret.metadata?.resourceVersion,
        };
      } catch (err) {
        if (httpStatusOf(err) === 404) return undefined;
        throw err;
      }
    },
    async writeSecret(namespace, name, contents: SecretContents, previous: StoredSecret) {
      const current = previous;
      const resourceVersion = previous.resourceVersion;
      const data: Record<string, string | null> = {};
      for (const key of Object.keys(current?.data ?? {})) if (!(key in contents.data)) data[key] = null;
      for (const [k, v] of Object.entries(contents.data)) data[k] = Buffer.from(v, 'utf8').toString('base64');
      const annotations: Record<string, string | null> = {};
      for (const key of Object.keys(current?.annotations ?? {})) {
        if (!(key in contents.annotations)) annotations[key] = null;
      }
      Object.assign(annotations, contents.annotations);
      await core.patchNamespacedSecret(
        {
          namespace,
          name,
          body: { metadata: { resourceVersion, annotations }, data },
          fieldManager: FIELD_MANAGER,
        },
        requestOptions({ contentType: PatchStrategy.MergePatch }),
      );
    },
    async writeCaBundle(configuration: WebhookConfigurationLike, caBundle) {
      const body = structuredClone(configuration) as V1MutatingWebhookConfiguration;
      for (const webhook of body.webhooks ?? []) webhook.clientConfig = { ...webhook.clientConfig, caBundle };
      await admission.replaceMutatingWebhookConfiguration({
        name: body.metadata?.name ?? '',
        body,
        fieldManager: FIELD_MANAGER,
      });
    },
  };
}
