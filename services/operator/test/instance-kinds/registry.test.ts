import { describe, expect, it } from '@jest/globals';
import type { V1CustomResourceDefinition } from '@kubernetes/client-node';
import {
  crdLabelSelector,
  formatInstanceKinds,
  InstanceKindRegistry,
  type InstanceKindSelection,
  NO_CONFIGURED_KINDS,
  parseInstanceKinds,
  selectInstanceKind,
} from '../../src/instance-kinds/registry.js';
import { crd } from '../fixtures.js';

const LABELLED = { 'registered-by': 'kubeplus' };

function selection(text: string): InstanceKindSelection {
  const r = parseInstanceKinds(text);
  if (!r.ok) throw new Error(r.errors.join('; '));
  return r.value;
}

describe('parseInstanceKinds', () => {
  it('reads kinds and whole groups, ignoring blanks and duplicates', () => {
    expect(
      parseInstanceKinds(' cloudark.io/v1/Agent, platformapi.kubeplus ,,cloudark.io/v1/Agent,platformapi.kubeplus'),
    ).toEqual({
      ok: true,
      value: { groups: ['platformapi.kubeplus'], kinds: [{ group: 'cloudark.io', version: 'v1', kind: 'Agent' }] },
    });
    expect(parseInstanceKinds('')).toEqual({ ok: true, value: NO_CONFIGURED_KINDS });
  });

  it('names every bad entry', () => {
    expect(
      parseInstanceKinds('cloudark.io/v1,Cloudark.IO,cloudark.io/V1/Agent,cloudark.io/v1/agent-x,a/b/c/d'),
    ).toEqual({
      ok: false,
      errors: [
        '"cloudark.io/v1": expected group/version/Kind (e.g. cloudark.io/v1/Agent) or a whole group',
        '"Cloudark.IO": "Cloudark.IO" is not an API group (a lowercase DNS subdomain such as cloudark.io)',
        '"cloudark.io/V1/Agent": "V1" is not an API version (a lowercase DNS label such as v1)',
        '"cloudark.io/v1/agent-x": "agent-x" is not a Kind (letters and digits, e.g. Agent)',
        '"a/b/c/d": expected group/version/Kind (e.g. cloudark.io/v1/Agent) or a whole group',
      ],
    });
  });

  it('formats a selection back', () => {
    expect(formatInstanceKinds(selection('platformapi.kubeplus,cloudark.io/v1/Agent'))).toBe(
      'cloudark.io/v1/Agent,platformapi.kubeplus',
    );
  });
});

describe('crdLabelSelector', () => {
  it('lets the API server filter CRDs by label only when nothing else is configured', () => {
    expect(crdLabelSelector(NO_CONFIGURED_KINDS)).toBe('registered-by=kubeplus');
    expect(crdLabelSelector(selection('cloudark.io'))).toBeUndefined();
    expect(crdLabelSelector(selection('cloudark.io/v1/Agent'))).toBeUndefined();
  });
});

describe('selectInstanceKind', () => {
  const v1v2 = [
    { name: 'v1', served: true, storage: false },
    { name: 'v2', served: true, storage: true },
  ];

  it('selects a CRD labelled registered-by=kubeplus at its storage version', () => {
    expect(selectInstanceKind(crd({ labels: LABELLED, versions: v1v2 }), NO_CONFIGURED_KINDS)).toEqual({
      gvr: { group: 'cloudark.io', version: 'v2', resource: 'agents' },
      kind: 'Agent',
      reason: 'label',
    });
  });

  it('ignores an unlabelled CRD, or one labelled by someone else, when nothing names it', () => {
    expect(selectInstanceKind(crd(), NO_CONFIGURED_KINDS)).toBeUndefined();
    expect(selectInstanceKind(crd({ labels: { 'registered-by': 'helm' } }), NO_CONFIGURED_KINDS)).toBeUndefined();
    expect(selectInstanceKind(crd(), selection('other.io,cloudark.io/v1/Robot'))).toBeUndefined();
  });

  it('selects every kind of a configured group, labelled or not', () => {
    expect(
      selectInstanceKind(
        crd({ group: 'platformapi.kubeplus', kind: 'WordpressService', plural: 'wordpressservices' }),
        selection('platformapi.kubeplus'),
      ),
    ).toEqual({
      gvr: { group: 'platformapi.kubeplus', version: 'v1', resource: 'wordpressservices' },
      kind: 'WordpressService',
      reason: 'group',
    });
  });

  it('watches a configured kind at the configured version when it is served, else at the storage version', () => {
    expect(selectInstanceKind(crd({ versions: v1v2 }), selection('cloudark.io/v1/Agent'))).toEqual({
      gvr: { group: 'cloudark.io', version: 'v1', resource: 'agents' },
      kind: 'Agent',
      reason: 'kind',
    });
    expect(selectInstanceKind(crd({ versions: v1v2 }), selection('cloudark.io/v3/Agent'))?.gvr.version).toBe('v2');
    // A kind entry wins over the label (which would pick the storage version).
    expect(
      selectInstanceKind(crd({ labels: LABELLED, versions: v1v2 }), selection('cloudark.io/v1/Agent'))?.reason,
    ).toBe('kind');
  });

  it('never selects a cluster-scoped CRD (instances are namespaced) or one serving no version', () => {
    expect(selectInstanceKind(crd({ labels: LABELLED, scope: 'Cluster' }), NO_CONFIGURED_KINDS)).toBeUndefined();
    expect(
      selectInstanceKind(
        crd({ labels: LABELLED, versions: [{ name: 'v1', served: false, storage: true }] }),
        NO_CONFIGURED_KINDS,
      ),
    ).toBeUndefined();
    expect(
      selectInstanceKind(
        { metadata: { name: 'broken', labels: LABELLED } } as unknown as V1CustomResourceDefinition,
        NO_CONFIGURED_KINDS,
      ),
    ).toBeUndefined();
  });
});

describe('InstanceKindRegistry', () => {
  it('answers which Kind a GVR holds and which GVR holds a Kind, following CRD changes', () => {
    const registry = new InstanceKindRegistry(selection('platformapi.kubeplus'));
    const agents = crd({ labels: LABELLED });
    expect(registry.select(agents)).toEqual({ group: 'cloudark.io', version: 'v1', resource: 'agents' });
    expect(registry.select(crd({ group: 'platformapi.kubeplus', kind: 'Wp', plural: 'wps' }))).toEqual({
      group: 'platformapi.kubeplus',
      version: 'v1',
      resource: 'wps',
    });
    expect(registry.select(crd({ group: 'other.io', kind: 'Thing', plural: 'things' }))).toBeUndefined();

    expect(registry.kindOf({ group: 'cloudark.io', version: 'v1', resource: 'agents' })).toBe('Agent');
    expect(registry.kindOf({ group: 'cloudark.io', version: 'v2', resource: 'agents' })).toBeUndefined();
    expect(registry.lookup('cloudark.io', 'Agent')).toEqual({
      group: 'cloudark.io',
      version: 'v1',
      kind: 'Agent',
      plural: 'agents',
    });
    expect(registry.lookup('other.io', 'Thing')).toBeUndefined();
    expect(registry.list().map((k) => k.gvr.resource)).toEqual(['agents', 'wps']);

    // The label is removed: no longer an instance Kind.
    expect(registry.select(crd())).toBeUndefined();
    expect(registry.lookup('cloudark.io', 'Agent')).toBeUndefined();

    registry.forget('wps.platformapi.kubeplus');
    expect(registry.list()).toEqual([]);
  });
});
