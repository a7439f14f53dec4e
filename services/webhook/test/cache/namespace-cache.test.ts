import { describe, expect, it } from '@jest/globals';
import { entryFromNamespace, NamespaceCache } from '../../src/cache/namespace-cache.js';
import { recordingLogger } from '../helpers/fake-informer.js';
import { namespace, TEAM_A, TEAM_A_ANNOTATION } from '../helpers/fixtures.js';

const TEAM_B = JSON.stringify({ nodeSelector: { pool: 'team-b-pool' }, tolerations: [] });
const INVALID = JSON.stringify({
  nodeSelector: { pool: 'team-a-pool' },
  tolerations: [{ key: 'k', effect: 'Sometimes' }],
});

describe('entryFromNamespace', () => {
  it('parses the annotation of a labeled namespace into the canonical spec', () => {
    const messy = JSON.stringify({
      tolerations: [
        { key: 'dedicated', value: 'team-a-pool', effect: 'NoSchedule' },
        { key: 'dedicated', operator: 'Equal', value: 'team-a-pool', effect: 'NoSchedule' },
      ],
      nodeSelector: { pool: 'team-a-pool' },
    });
    expect(entryFromNamespace(namespace('team-a', { annotation: messy }))).toEqual({
      state: 'valid',
      spec: TEAM_A,
      annotation: messy,
    });
  });

  it('is undefined for a namespace without the label, or with another value', () => {
    expect(entryFromNamespace(namespace('x', { labeled: false, annotation: TEAM_A_ANNOTATION }))).toBeUndefined();
    const falseLabel = namespace('x', { annotation: TEAM_A_ANNOTATION });
    falseLabel.metadata.labels['kubeplus.io/node-isolation-enabled'] = 'false';
    expect(entryFromNamespace(falseLabel)).toBeUndefined();
  });

  it('marks a missing annotation and an invalid one, with the parse errors', () => {
    expect(entryFromNamespace(namespace('x'))).toEqual({ state: 'annotation_missing' });
    const invalid = entryFromNamespace(namespace('x', { annotation: INVALID }));
    expect(invalid?.state).toBe('annotation_invalid');
    expect(invalid?.state === 'annotation_invalid' && invalid.errors.join(' ')).toMatch(/tolerations\[0\]\.effect/);
    expect(entryFromNamespace(namespace('x', { annotation: '{not json' }))?.state).toBe('annotation_invalid');
  });
});

describe('NamespaceCache driven by informer events', () => {
  it('add stores the parsed spec; lookups return the same parsed object (no parsing per request)', () => {
    const cache = new NamespaceCache();
    cache.upsert(namespace('team-a', { annotation: TEAM_A_ANNOTATION }));
    const first = cache.get('team-a');
    expect(first).toMatchObject({ state: 'valid', spec: TEAM_A });
    expect(cache.get('team-a')).toBe(first);
    expect(cache.get('other')).toBeUndefined();
  });

  it('ignores an add for a namespace without the label, or without a name', () => {
    const cache = new NamespaceCache();
    cache.upsert(namespace('plain', { labeled: false, annotation: TEAM_A_ANNOTATION }));
    cache.upsert({ metadata: { labels: { 'kubeplus.io/node-isolation-enabled': 'true' } } });
    expect(cache.size).toBe(0);
  });

  it('update with a new annotation replaces the spec', () => {
    const cache = new NamespaceCache();
    cache.upsert(namespace('team-a', { annotation: TEAM_A_ANNOTATION }));
    cache.upsert(namespace('team-a', { annotation: TEAM_B, resourceVersion: '2' }));
    expect(cache.get('team-a')).toMatchObject({ state: 'valid', spec: { nodeSelector: { pool: 'team-b-pool' } } });
  });

  it('update that removes the label removes the entry', () => {
    const cache = new NamespaceCache();
    cache.upsert(namespace('team-a', { annotation: TEAM_A_ANNOTATION }));
    cache.upsert(namespace('team-a', { labeled: false, annotation: TEAM_A_ANNOTATION, resourceVersion: '2' }));
    expect(cache.get('team-a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('update that removes the annotation invalidates the entry (annotation_missing)', () => {
    const cache = new NamespaceCache();
    cache.upsert(namespace('team-a', { annotation: TEAM_A_ANNOTATION }));
    cache.upsert(namespace('team-a', { resourceVersion: '2' }));
    expect(cache.get('team-a')).toEqual({ state: 'annotation_missing' });
  });

  it('update to an invalid annotation invalidates the entry and logs the errors once', () => {
    const logger = recordingLogger();
    const cache = new NamespaceCache({ logger });
    cache.upsert(namespace('team-a', { annotation: TEAM_A_ANNOTATION }));
    cache.upsert(namespace('team-a', { annotation: INVALID, resourceVersion: '2' }));
    cache.upsert(namespace('team-a', { annotation: INVALID, resourceVersion: '3' }));
    expect(cache.get('team-a')?.state).toBe('annotation_invalid');
    const warnings = logger.records.filter((r) => r.level === 'warn');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.meta).toMatchObject({ namespace: 'team-a' });
    expect(String(warnings[0]?.meta.errors)).toMatch(/effect/);
  });

  it('delete removes the entry', () => {
    const cache = new NamespaceCache();
    cache.upsert(namespace('team-a', { annotation: TEAM_A_ANNOTATION }));
    cache.remove(namespace('team-a'));
    expect(cache.get('team-a')).toBeUndefined();
  });

  it('counts entries per state', () => {
    const cache = new NamespaceCache();
    cache.upsert(namespace('a', { annotation: TEAM_A_ANNOTATION }));
    cache.upsert(namespace('b', { annotation: TEAM_B }));
    cache.upsert(namespace('c'));
    cache.upsert(namespace('d', { annotation: INVALID }));
    expect(cache.counts()).toEqual({ valid: 2, annotation_missing: 1, annotation_invalid: 1 });
  });
});

describe('NamespaceCache provisional entries (from a live GET)', () => {
  function clock(): { now: () => number; advance: (ms: number) => void } {
    let t = 1_000_000;
    return {
      now: () => t,
      advance: (ms) => {
        t += ms;
      },
    };
  }
  const valid = entryFromNamespace(namespace('team-a', { annotation: TEAM_A_ANNOTATION }));
  if (valid === undefined) throw new Error('fixture');

  it('stores an entry for a namespace the informer has not delivered', () => {
    const cache = new NamespaceCache();
    expect(cache.putProvisional('team-a', valid)).toBe(true);
    expect(cache.get('team-a')).toMatchObject({ state: 'valid', spec: TEAM_A });
  });

  it('never overrides what the informer delivered', () => {
    const cache = new NamespaceCache();
    cache.upsert(namespace('team-a', { annotation: TEAM_B }));
    expect(cache.putProvisional('team-a', valid)).toBe(false);
    expect(cache.get('team-a')).toMatchObject({ spec: { nodeSelector: { pool: 'team-b-pool' } } });
  });

  it('expires unless the informer confirms the namespace', () => {
    const c = clock();
    const cache = new NamespaceCache({ now: c.now, provisionalTtlMs: 60_000 });
    cache.putProvisional('team-a', valid);
    c.advance(59_999);
    expect(cache.get('team-a')).toBeDefined();
    c.advance(1);
    expect(cache.get('team-a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('becomes permanent once the informer delivers the namespace', () => {
    const c = clock();
    const cache = new NamespaceCache({ now: c.now, provisionalTtlMs: 1_000 });
    cache.putProvisional('team-a', valid);
    cache.upsert(namespace('team-a', { annotation: TEAM_A_ANNOTATION }));
    c.advance(10_000);
    expect(cache.get('team-a')).toMatchObject({ state: 'valid' });
  });
});
