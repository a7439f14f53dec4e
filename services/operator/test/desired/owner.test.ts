import { describe, expect, it } from '@jest/globals';
import {
  isManaged,
  isOwnedBy,
  ownerAnnotations,
  ownerIdentityLabels,
  ownerLabels,
  ownerNameSelector,
  ownerOf,
} from '../../src/desired/owner.js';
import { makeInstance } from './helpers.js';

describe('owner markers', () => {
  const i = makeInstance();

  it('labels an owned object with managed-by and the owner name, namespace and uid', () => {
    expect(ownerLabels(i)).toEqual({
      'app.kubernetes.io/managed-by': 'kubeplus-isolation',
      'kubeplus.io/owner-name': 'team-a-agent-instance',
      'kubeplus.io/owner-namespace': 'team-a',
      'kubeplus.io/owner-uid': '3f0c9a52-7d1e-4b7a-9c55-0a1b2c3d4e5f',
    });
    expect(ownerIdentityLabels(i)).not.toHaveProperty(['app.kubernetes.io/managed-by']);
  });

  it('shortens an owner name too long for a label value, stably', () => {
    const long = makeInstance({ name: 'x'.repeat(200) });
    const value = ownerLabels(long)['kubeplus.io/owner-name'] ?? '';
    expect(value.length).toBeLessThanOrEqual(63);
    expect(ownerLabels(long)['kubeplus.io/owner-name']).toBe(value);
  });

  it('records the exact identity in the owner annotation', () => {
    expect(ownerAnnotations(i)).toEqual({ 'kubeplus.io/owner': 'cloudark.io/Agent/team-a/team-a-agent-instance' });
  });

  it('recognizes objects of the instance by identity, not uid (a re-created instance adopts)', () => {
    const meta = { labels: ownerLabels(i), annotations: ownerAnnotations(i) };
    expect(isOwnedBy(meta, i)).toBe(true);
    expect(isOwnedBy(meta, makeInstance({ uid: 'another-uid' }))).toBe(true);
    expect(isOwnedBy(meta, makeInstance({ namespace: 'team-b' }))).toBe(false);
    expect(isOwnedBy(meta, makeInstance({ kind: 'Other' }))).toBe(false);
    expect(isOwnedBy({}, i)).toBe(false);
  });

  it('is not fooled by labels alone', () => {
    expect(isOwnedBy({ labels: ownerLabels(i) }, i)).toBe(false);
  });

  it('reads the owner back from the annotation', () => {
    expect(ownerOf({ annotations: ownerAnnotations(i) })).toEqual({
      group: 'cloudark.io',
      kind: 'Agent',
      namespace: 'team-a',
      name: 'team-a-agent-instance',
    });
    expect(ownerOf({ annotations: { 'kubeplus.io/owner': 'garbage' } })).toBeUndefined();
    expect(ownerOf({})).toBeUndefined();
  });

  it('knows what the operator manages', () => {
    expect(isManaged({ labels: ownerLabels(i) })).toBe(true);
    expect(isManaged({ labels: { 'app.kubernetes.io/managed-by': 'Helm' } })).toBe(false);
    expect(isManaged({})).toBe(false);
  });

  it('selects candidates by owner name and namespace labels', () => {
    expect(ownerNameSelector(i)).toBe(
      'kubeplus.io/owner-name=team-a-agent-instance,kubeplus.io/owner-namespace=team-a',
    );
  });
});
