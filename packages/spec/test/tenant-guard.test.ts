import { describe, expect, it } from '@jest/globals';
import {
  choosePlatformNamespace,
  decideTenantNamespace,
  discoverPlatformNamespace,
  isSystemNamespace,
  KUBEPLUS_API_GROUP,
  KUBEPLUS_RELEASE_NAME_ANNOTATION,
  NAMESPACE_CREATED_FOR_ANNOTATION,
  type TenantNamespaceFacts,
  tenantOf,
  type WebhookConfigurationShape,
} from '../src/index.js';

const CREATED = '2026-07-20T10:00:00Z';
const instance = (namespace: string, name: string): TenantNamespaceFacts['instance'] => ({
  group: KUBEPLUS_API_GROUP,
  kind: 'WebApp',
  namespace,
  name,
  creationTimestamp: CREATED,
});
const facts = (over: Partial<TenantNamespaceFacts> & Pick<TenantNamespaceFacts, 'instance'>): TenantNamespaceFacts => ({
  platformNamespace: 'default',
  releaseNamespace: 'kubeplus-system',
  namespace: undefined,
  ...over,
});
/** The namespace KubePlus creates during the instance's CREATE: its release name, quoted as KubePlus writes it. */
const kubeplusNamespace = (name: string, createdAt = '2026-07-20T09:59:59Z') => ({
  annotations: { [KUBEPLUS_RELEASE_NAME_ANNOTATION]: `"webapp-${name}"`, 'meta.helm.sh/release-namespace': name },
  creationTimestamp: createdAt,
});

describe('decideTenantNamespace', () => {
  it('an instance in the platform namespace isolates the namespace KubePlus created for it (quoted release name)', () => {
    const d = decideTenantNamespace(
      facts({ instance: instance('default', 'shop'), namespace: kubeplusNamespace('shop') }),
    );
    expect(d).toEqual({ decision: 'isolate', tenant: { name: 'shop', createdByOperator: true } });
  });

  it('accepts the release name unquoted too', () => {
    const ns = { annotations: { [KUBEPLUS_RELEASE_NAME_ANNOTATION]: 'webapp-shop' }, creationTimestamp: CREATED };
    expect(decideTenantNamespace(facts({ instance: instance('default', 'shop'), namespace: ns })).decision).toBe(
      'isolate',
    );
  });

  it('accepts a namespace the operator created for this instance (kubeplus.io/created-for), whatever its age', () => {
    const ns = {
      annotations: { [NAMESPACE_CREATED_FOR_ANNOTATION]: `${KUBEPLUS_API_GROUP}/WebApp/default/shop` },
      creationTimestamp: '2020-01-01T00:00:00Z',
    };
    expect(decideTenantNamespace(facts({ instance: instance('default', 'shop'), namespace: ns })).decision).toBe(
      'isolate',
    );
  });

  it('an instance in the platform namespace whose namespace does not exist yet: the operator creates it', () => {
    expect(decideTenantNamespace(facts({ instance: instance('default', 'shop') }))).toEqual({
      decision: 'isolate',
      tenant: { name: 'shop', createdByOperator: true },
    });
  });

  it('a team-a instance in its own namespace isolates that namespace, whatever the namespace carries', () => {
    expect(decideTenantNamespace(facts({ instance: instance('team-a', 'agent'), namespace: {} }))).toEqual({
      decision: 'isolate',
      tenant: { name: 'team-a', createdByOperator: false },
    });
  });

  it('an instance name that cannot name a namespace is invalid', () => {
    const d = decideTenantNamespace(facts({ instance: instance('default', 'Shop.V2') }));
    expect(d.decision).toBe('invalid');
  });

  it.each([['kube-system'], ['kube-public'], ['kube-node-lease'], ['default']])(
    'refuses %s (system-namespace), named after or lived in',
    (name) => {
      const named = decideTenantNamespace(facts({ instance: instance('default', name), namespace: {} }));
      expect(named).toMatchObject({ decision: 'refuse', namespace: name, reason: 'system-namespace' });
      const lived = decideTenantNamespace(facts({ instance: instance(name, 'x'), platformNamespace: 'kubeplus' }));
      expect(lived).toMatchObject({ decision: 'refuse', namespace: name, reason: 'system-namespace' });
    },
  );

  it('refuses the release namespace, named after or lived in, even when created for the instance', () => {
    const named = decideTenantNamespace(
      facts({ instance: instance('default', 'kubeplus-system'), namespace: kubeplusNamespace('kubeplus-system') }),
    );
    expect(named).toMatchObject({ decision: 'refuse', namespace: 'kubeplus-system', reason: 'release-namespace' });
    expect(named.decision === 'refuse' && named.message).toContain("kubeplus-isolation's own namespace");
    const lived = decideTenantNamespace(facts({ instance: instance('kubeplus-system', 'x') }));
    expect(lived).toMatchObject({ decision: 'refuse', reason: 'release-namespace' });
  });

  it('refuses the platform namespace: an instance named after it', () => {
    const d = decideTenantNamespace(
      facts({ platformNamespace: 'kubeplus', instance: instance('kubeplus', 'kubeplus'), namespace: {} }),
    );
    expect(d).toMatchObject({ decision: 'refuse', namespace: 'kubeplus', reason: 'platform-namespace' });
  });

  it('refuses an existing namespace without either marker, saying what it lacks', () => {
    const d = decideTenantNamespace(
      facts({ instance: instance('default', 'team-b'), namespace: { creationTimestamp: CREATED } }),
    );
    expect(d).toMatchObject({ decision: 'refuse', reason: 'not-created-for-instance', namespace: 'team-b' });
    expect(d.decision === 'refuse' && d.message).toContain(`${KUBEPLUS_RELEASE_NAME_ANNOTATION}=webapp-team-b`);
  });

  it("refuses a namespace created for another instance (another Kind's release, another instance's created-for)", () => {
    const other = { annotations: { [KUBEPLUS_RELEASE_NAME_ANNOTATION]: '"mysql-team-b"' }, creationTimestamp: CREATED };
    const d = decideTenantNamespace(facts({ instance: instance('default', 'team-b'), namespace: other }));
    expect(d).toMatchObject({ decision: 'refuse', reason: 'not-created-for-instance' });
    expect(d.decision === 'refuse' && d.message).toContain('created for someone else');
    const ours = {
      annotations: { [NAMESPACE_CREATED_FOR_ANNOTATION]: `${KUBEPLUS_API_GROUP}/WebApp/elsewhere/team-b` },
      creationTimestamp: CREATED,
    };
    expect(decideTenantNamespace(facts({ instance: instance('default', 'team-b'), namespace: ours })).decision).toBe(
      'refuse',
    );
  });

  it('refuses a namespace KubePlus stamped but that existed more than 30 s before the instance', () => {
    const stamped = kubeplusNamespace('team-b', '2026-07-20T09:59:29Z'); // 31 s before
    const d = decideTenantNamespace(facts({ instance: instance('default', 'team-b'), namespace: stamped }));
    expect(d).toMatchObject({ decision: 'refuse', reason: 'not-created-for-instance' });
    expect(d.decision === 'refuse' && d.message).toContain('existed before');
    // At the edge (30 s, KubePlus's webhook timeout) it is accepted.
    const edge = kubeplusNamespace('team-b', '2026-07-20T09:59:30Z');
    expect(decideTenantNamespace(facts({ instance: instance('default', 'team-b'), namespace: edge })).decision).toBe(
      'isolate',
    );
  });

  it('refuses a stamped namespace when either creation time is unknown', () => {
    const ns = { annotations: { [KUBEPLUS_RELEASE_NAME_ANNOTATION]: 'webapp-team-b' } };
    const d = decideTenantNamespace(facts({ instance: instance('default', 'team-b'), namespace: ns }));
    expect(d).toMatchObject({ decision: 'refuse', reason: 'not-created-for-instance' });
  });

  it('the release namespace is optional (the CLI may not know it)', () => {
    const d = decideTenantNamespace({
      instance: instance('default', 'kubeplus-system'),
      platformNamespace: 'default',
      namespace: undefined,
    });
    expect(d.decision).toBe('isolate');
  });
});

describe('tenantOf', () => {
  it('is undefined for system and platform namespaces, the name otherwise', () => {
    expect(tenantOf({ namespace: 'default', name: 'kube-system' }, 'default')).toBeUndefined();
    expect(tenantOf({ namespace: 'default', name: 'default' }, 'default')).toBeUndefined();
    expect(tenantOf({ namespace: 'kube-system', name: 'x' }, 'default')).toBeUndefined();
    expect(tenantOf({ namespace: 'default', name: 'shop' }, 'default')).toBe('shop');
    expect(tenantOf({ namespace: 'team-a', name: 'agent' }, 'default')).toBe('team-a');
  });
});

describe('isSystemNamespace', () => {
  it('is default and kube-*', () => {
    expect(['default', 'kube-system', 'kube-public', 'kube-foo'].every(isSystemNamespace)).toBe(true);
    expect(['defaults', 'kubeplus', 'team-a', 'my-kube-ns'].some(isSystemNamespace)).toBe(false);
  });
});

const kubeplusWebhook = (namespace: string, apiGroups = [KUBEPLUS_API_GROUP]): WebhookConfigurationShape => ({
  metadata: { name: 'platform-as-code.crd-binding' },
  webhooks: [
    {
      name: 'platform-as-code.crd-binding.v1',
      clientConfig: { service: { namespace, name: 'crd-hook-service' } },
      rules: [{ apiGroups: ['apiextensions.k8s.io', ''] }, { apiGroups }],
    },
  ],
});

describe('discoverPlatformNamespace', () => {
  it("finds the namespace of the service KubePlus's webhook calls", () => {
    expect(discoverPlatformNamespace([kubeplusWebhook('default')])).toEqual({
      found: true,
      namespace: 'default',
      webhook: 'platform-as-code.crd-binding/platform-as-code.crd-binding.v1',
    });
  });

  it('ignores webhooks matching every group through "*", URL webhooks and unrelated ones', () => {
    const wildcard = kubeplusWebhook('elsewhere', ['*']);
    const url: WebhookConfigurationShape = {
      metadata: { name: 'url' },
      webhooks: [{ name: 'u', clientConfig: {}, rules: [{ apiGroups: [KUBEPLUS_API_GROUP] }] }],
    };
    const none = discoverPlatformNamespace([wildcard, url, { metadata: { name: 'empty' } }]);
    expect(none.found).toBe(false);
    expect(discoverPlatformNamespace([wildcard, url, kubeplusWebhook('kp')])).toMatchObject({
      found: true,
      namespace: 'kp',
    });
  });

  it('several webhooks in one namespace agree; in several namespaces it is ambiguous', () => {
    expect(discoverPlatformNamespace([kubeplusWebhook('kp'), kubeplusWebhook('kp')])).toMatchObject({
      found: true,
      namespace: 'kp',
    });
    const two = discoverPlatformNamespace([kubeplusWebhook('a'), kubeplusWebhook('b')]);
    expect(two.found).toBe(false);
    expect(two.found === false && two.reason).toContain('several namespaces');
  });
});

describe('choosePlatformNamespace', () => {
  const found = { found: true as const, namespace: 'default', webhook: 'w' };
  it('flag > discovered > fallback kubeplus', () => {
    expect(choosePlatformNamespace('platform', found)).toMatchObject({ namespace: 'platform', source: 'flag' });
    expect(choosePlatformNamespace('', found)).toMatchObject({ namespace: 'default', source: 'discovered' });
    expect(choosePlatformNamespace(undefined, { found: false, reason: 'none' })).toEqual({
      namespace: 'kubeplus',
      source: 'fallback',
      detail: 'none',
    });
    expect(choosePlatformNamespace('', undefined)).toMatchObject({ namespace: 'kubeplus', source: 'fallback' });
  });
});
