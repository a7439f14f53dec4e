import { describe, expect, it } from '@jest/globals';
import {
  effectiveMinimum,
  isStricter,
  mixedPolicyNamespaces,
  type SandboxInstanceMeta,
  sandboxInstanceMeta,
  sandboxPeers,
  stricterPeers,
  stricterPolicyMessage,
  tenantOf,
} from '../../src/desired/sandbox-peers.js';

const meta = (namespace: string, name: string, annotation: string, kind = 'Agent'): SandboxInstanceMeta => ({
  group: 'cloudark.io',
  kind,
  namespace,
  name,
  annotation,
});
const KATA = '{"minRuntimeClass":"kata","enforce":true}';
const RUNSC_ADVISORY = '{"minRuntimeClass":"runsc","enforce":false}';
const RUNSC = '{"minRuntimeClass":"runsc"}';
const self = { group: 'cloudark.io', kind: 'Agent', namespace: 'team-a', name: 'a' };

describe('tenantOf', () => {
  it('is the instance’s namespace, or a namespace named after it in the platform namespace', () => {
    expect(tenantOf({ namespace: 'team-a', name: 'x' })).toBe('team-a');
    expect(tenantOf({ namespace: 'kubeplus', name: 'team-b' })).toBe('team-b');
    expect(tenantOf({ namespace: 'kubeplus', name: 'team-b' }, 'platform')).toBe('kubeplus');
    expect(tenantOf({ namespace: 'kubeplus', name: 'Not_A_Namespace' })).toBeUndefined();
  });
});

describe('sandboxPeers', () => {
  const all = [
    meta('team-a', 'a', KATA),
    meta('team-a', 'b', RUNSC_ADVISORY),
    meta('team-a', 'a', RUNSC, 'Tool'), // same name, another Kind: a peer, not itself
    meta('kubeplus', 'team-a', KATA), // binds team-a from the platform namespace
    meta('team-a', 'broken', '{"minRuntimeClass":"strong"}'), // invalid: binds nothing new
    meta('team-b', 'c', KATA),
  ];

  it('are the other valid instances bound to the same tenant namespace, sorted by identity', () => {
    expect(
      sandboxPeers(all, self, 'team-a').map((p) => `${p.identity.kind}/${p.identity.namespace}/${p.identity.name}`),
    ).toEqual(['Agent/kubeplus/team-a', 'Agent/team-a/b', 'Tool/team-a/a']);
    expect(sandboxPeers(all, self, 'team-a')[1]?.spec).toEqual({ minRuntimeClass: 'runsc', enforce: false });
    expect(sandboxPeers(all, { ...self, namespace: 'team-b', name: 'c' }, 'team-b')).toEqual([]);
  });
});

describe('strictness', () => {
  const kata = { minRuntimeClass: 'kata', enforce: true } as const;
  const kataAdvisory = { minRuntimeClass: 'kata', enforce: false } as const;
  const runsc = { minRuntimeClass: 'runsc', enforce: true } as const;
  const peer = (spec: typeof kata | typeof kataAdvisory | typeof runsc, name: string) => ({
    identity: { ...self, name },
    spec,
  });

  it('a stronger minimum or enforce over advisory is stricter; equal is not', () => {
    expect(isStricter(kata, runsc)).toBe(true);
    expect(isStricter(runsc, kata)).toBe(false);
    expect(isStricter(kata, kataAdvisory)).toBe(true);
    expect(isStricter(kataAdvisory, kata)).toBe(false);
    expect(isStricter(kata, kata)).toBe(false);
    // Neither dominates: each is stricter in one respect.
    expect(isStricter(kataAdvisory, runsc)).toBe(true);
    expect(isStricter(runsc, kataAdvisory)).toBe(true);
  });

  it('the effective minimum is the strongest; the Warning names every stricter peer and what governs', () => {
    const peers = [peer(kata, 'k'), peer(runsc, 'r')];
    expect(effectiveMinimum(runsc, peers)).toBe('kata');
    expect(effectiveMinimum(kata, [peer(runsc, 'r')])).toBe('kata');
    expect(stricterPeers(runsc, peers).map((p) => p.identity.name)).toEqual(['k']);
    expect(stricterPolicyMessage(runsc, 'team-a', stricterPeers(runsc, peers))).toBe(
      "namespace team-a is also governed by the stricter sandbox isolation of cloudark.io/Agent/team-a/k (minimum kata, enforced); every policy bound to the namespace applies, so a Sandbox there must satisfy the strictest, not this instance's minimum runsc, enforced",
    );
    expect(stricterPolicyMessage(kata, 'team-a', stricterPeers(kata, peers))).toBeUndefined();
  });
});

describe('mixedPolicyNamespaces', () => {
  it('counts the namespaces whose valid policies differ, once each', () => {
    expect(
      mixedPolicyNamespaces([
        meta('team-a', 'a', KATA),
        meta('team-a', 'b', RUNSC_ADVISORY),
        meta('kubeplus', 'team-a', RUNSC),
        meta('team-b', 'c', KATA),
        meta('team-b', 'd', '{"minRuntimeClass":"kata"}'), // enforce defaults to true: the same policy
        meta('team-c', 'e', KATA),
        meta('team-c', 'f', 'not json'),
      ]),
    ).toBe(1);
    expect(mixedPolicyNamespaces([])).toBe(0);
  });
});

describe('sandboxInstanceMeta', () => {
  it('keeps a cached instance carrying the annotation, and nothing else', () => {
    const kind = { group: 'cloudark.io', kind: 'Agent' };
    expect(
      sandboxInstanceMeta(kind, {
        name: 'a',
        namespace: 'team-a',
        annotations: { 'kubeplus.io/sandbox-isolation': KATA, other: 'x' },
      }),
    ).toEqual(meta('team-a', 'a', KATA));
    expect(sandboxInstanceMeta(kind, { name: 'a', namespace: 'team-a', annotations: {} })).toBeUndefined();
    expect(
      sandboxInstanceMeta(kind, { name: 'a', annotations: { 'kubeplus.io/sandbox-isolation': KATA } }),
    ).toBeUndefined();
    expect(sandboxInstanceMeta(kind, undefined)).toBeUndefined();
  });
});
