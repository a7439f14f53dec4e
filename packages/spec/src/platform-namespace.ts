/**
 * KubePlus's own namespace ("the platform namespace"): where KubePlus's instances live, so where
 * an instance gets a namespace of its own named after it. KubePlus's README and CI install it in
 * `default`, but any namespace is possible; the operator learns it from its flag, else from
 * KubePlus's mutating webhook registration, else falls back to `kubeplus`. Pure: the caller
 * lists the MutatingWebhookConfigurations.
 */
import { isDns1123Label } from './k8s-validation.js';

/** The API group of every Kind KubePlus registers (its CRDs, `v1alpha1`). */
export const KUBEPLUS_API_GROUP = 'platformapi.kubeplus';

/** The platform namespace when neither the flag nor KubePlus's webhook names one (the operator's old default). */
export const FALLBACK_PLATFORM_NAMESPACE = 'kubeplus';

/** What the operator reads of a MutatingWebhookConfiguration (client-node's V1MutatingWebhookConfiguration fits). */
export interface WebhookConfigurationShape {
  metadata?: { name?: string };
  webhooks?: readonly {
    name?: string;
    clientConfig?: { service?: { namespace?: string; name?: string } };
    rules?: readonly { apiGroups?: readonly string[] }[];
  }[];
}

export type PlatformNamespaceDiscovery =
  | { found: true; namespace: string; webhook: string }
  | { found: false; reason: string };

/**
 * KubePlus's namespace from the webhook registrations: the namespace of the service behind every
 * webhook whose rules name `platformapi.kubeplus` explicitly (a `*` group matches any webhook
 * with cluster-wide rules, so it says nothing about KubePlus) and that calls a service (a URL
 * webhook says nothing about a namespace). Several webhooks in ONE namespace agree; in several
 * namespaces it is ambiguous and nothing is found (the caller falls back and logs the reason).
 */
export function discoverPlatformNamespace(
  configurations: readonly WebhookConfigurationShape[],
): PlatformNamespaceDiscovery {
  const byNamespace = new Map<string, string[]>();
  for (const config of configurations) {
    for (const webhook of config.webhooks ?? []) {
      const namesGroup = (webhook.rules ?? []).some((r) => (r.apiGroups ?? []).includes(KUBEPLUS_API_GROUP));
      const namespace = webhook.clientConfig?.service?.namespace;
      if (!namesGroup || namespace === undefined || !isDns1123Label(namespace)) continue;
      const names = byNamespace.get(namespace) ?? [];
      names.push(`${config.metadata?.name ?? '?'}/${webhook.name ?? '?'}`);
      byNamespace.set(namespace, names);
    }
  }
  if (byNamespace.size === 0) {
    return {
      found: false,
      reason: `no MutatingWebhookConfiguration has a webhook whose rules name the group ${KUBEPLUS_API_GROUP} and that calls a service (KubePlus not installed?)`,
    };
  }
  if (byNamespace.size > 1) {
    const seen = [...byNamespace].map(([ns, hooks]) => `${ns} (${hooks.join(', ')})`).join('; ');
    return {
      found: false,
      reason: `webhooks naming ${KUBEPLUS_API_GROUP} call services in several namespaces: ${seen}`,
    };
  }
  const [namespace, hooks] = [...byNamespace][0] as [string, string[]];
  return { found: true, namespace, webhook: hooks.join(', ') };
}

export type PlatformNamespaceSource = 'flag' | 'discovered' | 'fallback';

export interface PlatformNamespaceChoice {
  namespace: string;
  source: PlatformNamespaceSource;
  /** Which webhook it was found from, or why nothing was found (for the startup log). */
  detail: string;
}

/**
 * The platform namespace in force: the flag (`--platform-namespace`, non-empty) > the namespace
 * KubePlus's webhook calls > `kubeplus` (the behaviour from before discovery, where KubePlus is absent).
 */
export function choosePlatformNamespace(
  flag: string | undefined,
  discovered: PlatformNamespaceDiscovery | undefined,
): PlatformNamespaceChoice {
  if (flag !== undefined && flag !== '') return { namespace: flag, source: 'flag', detail: '--platform-namespace' };
  if (discovered?.found === true)
    return { namespace: discovered.namespace, source: 'discovered', detail: `webhook ${discovered.webhook}` };
  return {
    namespace: FALLBACK_PLATFORM_NAMESPACE,
    source: 'fallback',
    detail: discovered?.found === false ? discovered.reason : 'not discovered',
  };
}
