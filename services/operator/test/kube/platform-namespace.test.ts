import { describe, expect, it } from '@jest/globals';
import type { PlatformNamespaceChoice } from '@kubeplus-isolation/spec';
import type { V1MutatingWebhookConfiguration } from '@kubernetes/client-node';
import { resolvePlatformNamespace, watchPlatformNamespace } from '../../src/kube/platform-namespace.js';
import { FakeInformerSource } from '../runtime/fakes.js';

const registration = (name: string, namespace: string): V1MutatingWebhookConfiguration => ({
  apiVersion: 'admissionregistration.k8s.io/v1',
  kind: 'MutatingWebhookConfiguration',
  metadata: { name },
  webhooks: [
    {
      name: 'platform-as-code.crd-binding',
      admissionReviewVersions: ['v1'],
      sideEffects: 'None',
      clientConfig: { service: { namespace, name: 'crd-hook-service' } },
      rules: [
        { apiGroups: ['platformapi.kubeplus'], apiVersions: ['v1alpha1'], resources: ['*'], operations: ['CREATE'] },
      ],
    },
  ],
});

/** Resolves once every timer queued so far has run (the watch decides on a 0 ms timer). */
const tick = () => new Promise((r) => setTimeout(r, 5));

describe('resolvePlatformNamespace', () => {
  it('the flag, without listing anything', async () => {
    let listed = 0;
    const choice = await resolvePlatformNamespace('platform', async () => {
      listed++;
      return [];
    });
    expect(choice).toMatchObject({ namespace: 'platform', source: 'flag' });
    expect(listed).toBe(0);
  });

  it("empty: KubePlus's webhook's namespace, else kubeplus", async () => {
    expect(await resolvePlatformNamespace('', async () => [registration('kp', 'default')])).toMatchObject({
      namespace: 'default',
      source: 'discovered',
    });
    expect(await resolvePlatformNamespace('', async () => [])).toMatchObject({
      namespace: 'kubeplus',
      source: 'fallback',
    });
  });

  it('a failed list is an error naming the way out, never a silent fallback', async () => {
    await expect(
      resolvePlatformNamespace('', async () => {
        throw new Error('forbidden');
      }),
    ).rejects.toThrow(/set --platform-namespace, or grant list and watch on mutatingwebhookconfigurations.*forbidden/);
  });
});

describe('watchPlatformNamespace', () => {
  it('judges nothing before the first complete list, then reports a change once', async () => {
    const source = new FakeInformerSource<V1MutatingWebhookConfiguration>();
    const changes: PlatformNamespaceChoice[] = [];
    const watch = watchPlatformNamespace(source, 'default', (c) => changes.push(c));
    // The first list is under way: nothing yet names KubePlus's namespace.
    await tick();
    expect(changes).toEqual([]);
    source.upsert(registration('kp', 'default'));
    source.connect();
    await tick();
    expect(changes).toEqual([]);
    // KubePlus re-registered from another namespace.
    source.upsert(registration('kp', 'kubeplus-ns'));
    await tick();
    expect(changes.map((c) => c.namespace)).toEqual(['kubeplus-ns']);
    source.remove(registration('kp', 'kubeplus-ns'));
    await tick();
    expect(changes).toHaveLength(1);
    await watch.stop();
    expect(source.stops).toBe(1);
  });

  it('a burst of events (a relist applies adds before deletes) is judged once applied, never half-way', async () => {
    const source = new FakeInformerSource<V1MutatingWebhookConfiguration>();
    source.objects.set('/old', registration('old', 'default'));
    const changes: PlatformNamespaceChoice[] = [];
    const watch = watchPlatformNamespace(source, 'default', (c) => changes.push(c));
    source.connect();
    await tick();
    // Same burst: a second namespace for a moment (ambiguous: it would fall back to kubeplus), then gone.
    source.upsert(registration('transient', 'elsewhere'));
    source.remove(registration('transient', 'elsewhere'));
    await tick();
    expect(changes).toEqual([]);
    await watch.stop();
  });
});
