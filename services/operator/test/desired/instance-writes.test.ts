import { describe, expect, it } from '@jest/globals';
import { isOwnerGone, LEGACY_FINALIZER, planInstance } from '../../src/desired/instance-writes.js';

describe('planInstance: the operator never writes an instance, except to take off the legacy finalizer', () => {
  it('syncs an instance asking for isolation, prunes one that does not, leaves one being deleted to orphan cleanup', () => {
    expect(planInstance({ finalizers: [] }, true)).toEqual({ isolation: 'sync' });
    expect(planInstance({ finalizers: [] }, false)).toEqual({ isolation: 'prune' });
    expect(planInstance({ finalizers: [], deletionTimestamp: '2026-12-07T00:00:00Z' }, true)).toEqual({
      isolation: 'none',
    });
  });

  it('removes the legacy finalizer wherever it is, keeping the others in order', () => {
    expect(LEGACY_FINALIZER).toBe('isolation.kubeplus.io/cleanup');
    expect(planInstance({ finalizers: ['a', LEGACY_FINALIZER, 'b'] }, true)).toEqual({
      isolation: 'sync',
      removeLegacyFinalizer: ['a', 'b'],
    });
    expect(planInstance({ finalizers: [LEGACY_FINALIZER], deletionTimestamp: '2026-12-07T00:00:00Z' }, false)).toEqual({
      isolation: 'none',
      removeLegacyFinalizer: [],
    });
    expect(planInstance({ finalizers: ['someone.else/finalizer'] }, false)).toEqual({ isolation: 'prune' });
  });
});

describe('isOwnerGone', () => {
  it('absent or being deleted (whatever finalizers hold it) is gone; otherwise live', () => {
    expect(isOwnerGone(undefined)).toBe(true);
    expect(isOwnerGone({ deletionTimestamp: '2026-12-07T00:00:00Z' })).toBe(true);
    expect(isOwnerGone({})).toBe(false);
  });
});
