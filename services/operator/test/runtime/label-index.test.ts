import { describe, expect, it } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import { ResourceInformer } from '../../src/runtime/informer.js';
import { indexByLabels, LabelIndex } from '../../src/runtime/label-index.js';
import { FakeClock, FakeInformerSource, flush } from './fakes.js';

const NAME = 'kubeplus.io/owner-name';
const NS = 'kubeplus.io/owner-namespace';

function object(name: string, labels?: Record<string, string>, namespace?: string): KubernetesObject {
  return { metadata: { name, ...(namespace === undefined ? {} : { namespace }), ...(labels && { labels }) } };
}
const owned = (name: string, ownerName: string, ownerNamespace: string, extra: Record<string, string> = {}) =>
  object(name, { [NAME]: ownerName, [NS]: ownerNamespace, ...extra });
/** The selector every reconcile lists an owner's objects by. */
const byOwner = (name: string, namespace: string): Array<[string, string]> => [
  [NAME, name],
  [NS, namespace],
];
const names = (objs: readonly KubernetesObject[] | undefined): string[] | undefined =>
  objs?.map((o) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name}`).sort();

describe('LabelIndex', () => {
  it('answers a selector naming every indexed label with the objects filed under its values, whatever its other terms', () => {
    const index = new LabelIndex([NAME, NS]);
    index.upsert(owned('rc-a', 'a', 'team-a'));
    index.upsert(owned('vap-a', 'a', 'team-a', { role: 'enforce' }));
    index.upsert(owned('rc-a2', 'a', 'team-b')); // same name, other namespace
    index.upsert(owned('param', 'a', 'team-a', {}));
    index.upsert(object('param', { [NAME]: 'a', [NS]: 'team-a' }, 'team-a')); // namespaced: another object
    expect(names(index.candidates(byOwner('a', 'team-a')))).toEqual(['/param', '/rc-a', '/vap-a', 'team-a/param']);
    expect(
      names(
        index.candidates([
          [NS, 'team-b'],
          [NAME, 'a'],
          ['role', 'x'],
        ]),
      ),
    ).toEqual(['/rc-a2']);
    expect(index.candidates(byOwner('a', 'team-c'))).toEqual([]);
  });

  it('cannot answer a selector that leaves out an indexed label; a contradictory one matches nothing', () => {
    const index = new LabelIndex([NAME, NS]);
    index.upsert(owned('rc-a', 'a', 'team-a'));
    expect(index.candidates([[NAME, 'a']])).toBeUndefined();
    expect(index.candidates([])).toBeUndefined();
    expect(
      index.candidates([
        [NAME, 'a'],
        [NAME, 'b'],
        [NS, 'team-a'],
      ]),
    ).toEqual([]);
  });

  it('re-files an object whose labels changed, drops one that lost them or was deleted, ignores one without a name', () => {
    const index = new LabelIndex([NAME, NS]);
    index.upsert(owned('rc', 'a', 'team-a'));
    index.upsert(owned('rc', 'b', 'team-a')); // relabelled: another owner
    expect(index.candidates(byOwner('a', 'team-a'))).toEqual([]);
    expect(names(index.candidates(byOwner('b', 'team-a')))).toEqual(['/rc']);
    const latest = owned('rc', 'b', 'team-a', { v: '2' });
    index.upsert(latest);
    expect(index.candidates(byOwner('b', 'team-a'))).toEqual([latest]); // the object as last seen
    index.upsert(object('rc', { [NAME]: 'b' })); // lost one indexed label
    expect(index.candidates(byOwner('b', 'team-a'))).toEqual([]);
    index.upsert(owned('vap', 'b', 'team-a'));
    index.remove(owned('vap', 'b', 'team-a'));
    expect(index.candidates(byOwner('b', 'team-a'))).toEqual([]);
    index.upsert({ metadata: { labels: { [NAME]: 'b', [NS]: 'team-a' } } });
    expect(index.candidates(byOwner('b', 'team-a'))).toEqual([]);
  });
});

describe('indexByLabels', () => {
  it('follows an informer: its cache replayed, then add, update and delete, until unbound', async () => {
    const source = new FakeInformerSource<KubernetesObject>();
    const informer = new ResourceInformer<KubernetesObject>(source, { clock: new FakeClock(), name: 'runtimeclasses' });
    informer.start();
    await flush();
    source.upsert(owned('cached', 'a', 'team-a'));
    const { index, unbind } = indexByLabels(informer, [NAME, NS]);
    const sel: Array<[string, string]> = [
      [NAME, 'a'],
      [NS, 'team-a'],
    ];
    expect(names(index.candidates(sel))).toEqual(['/cached']);
    source.upsert(owned('new', 'a', 'team-a'));
    source.upsert(owned('cached', 'z', 'team-a'));
    expect(names(index.candidates(sel))).toEqual(['/new']);
    source.remove(owned('new', 'a', 'team-a'));
    expect(index.candidates(sel)).toEqual([]);
    unbind();
    source.upsert(owned('later', 'a', 'team-a'));
    expect(index.candidates(sel)).toEqual([]);
  });
});
