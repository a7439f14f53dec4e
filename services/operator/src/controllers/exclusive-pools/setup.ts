/**
 * The exclusive-pools controller sets itself up, when on (`--exclusive-pools`:
 * `ExclusivePoolsFeature` present): the cache of the Namespaces labelled
 * `kubeplus.io/node-isolation-enabled=true` (the audit's, when it runs), the Node cache (the
 * audit's, when it runs: one watch; names, labels and taints kept), the cache of the ExclusivePools
 * objects (the one it writes) (so an edit by hand is put back), and the reconciler over them
 * (reconciler.ts), on ONE key: every event of the Namespace or ExclusivePools cache, and a Node
 * added, deleted or relabelled (node-changes.ts), replans the whole parameter. The chart installs the CRD and the policy (files/exclusive-pools.yaml).
 */
import { NODE_ISOLATION_ENABLED_LABEL } from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import { Gauge } from 'prom-client';
import type { EventTarget } from '../../cluster/port.js';
import {
  EXCLUSIVE_POOLS_API_VERSION,
  EXCLUSIVE_POOLS_NAME,
  EXCLUSIVE_POOLS_RESOURCE,
} from '../../desired/exclusive-pools.js';
import type { InstanceIdentity } from '../../desired/instance.js';
import { informerKeySource } from '../../runtime/key-sources.js';
import type { ControllerOptions } from '../../runtime/manager.js';
import { NODES_RESOURCE, trimNode } from '../audit/nodes.js';
import { ISOLATED_NAMESPACES_RESOURCE } from '../audit/setup.js';
import { recordEvent, type SetupContext } from '../setup.js';
import { nodeLabelChanges } from './node-changes.js';
import { EXCLUSIVE_POOLS_CONTROLLER, type ExclusivePoolsPort, ExclusivePoolsReconciler } from './reconciler.js';

export { EXCLUSIVE_POOLS_CONTROLLER };

export interface ExclusivePoolsFeature {
  port: ExclusivePoolsPort;
}

const [GROUP = '', VERSION = ''] = EXCLUSIVE_POOLS_API_VERSION.split('/');
const ISOLATED_SELECTOR = `${NODE_ISOLATION_ENABLED_LABEL}=true`;

export function setupExclusivePools(
  ctx: SetupContext,
  feature: ExclusivePoolsFeature,
  deps: { resolveOwner(owner: InstanceIdentity): EventTarget | undefined },
): ControllerOptions {
  // The audit's informer when both are on (asked for the same way: one cache).
  const namespaces = ctx.caches.informer<KubernetesObject>({
    name: ISOLATED_NAMESPACES_RESOURCE,
    resource: 'v1/namespaces',
    labelSelector: ISOLATED_SELECTOR,
    source: () => ctx.sources.namespaces(ISOLATED_SELECTOR),
  });
  // The pool nodes: the audit's Node cache when it runs (asked for the same way: one watch).
  const nodes = ctx.caches.informer<KubernetesObject>({
    name: NODES_RESOURCE,
    resource: 'v1/nodes',
    source: () => ctx.sources.nodes(),
    transform: trimNode,
  });
  // Every ExclusivePools object (there is one); the chart installs its CRD with the flag.
  const params = ctx.caches.informer<KubernetesObject>({
    name: EXCLUSIVE_POOLS_RESOURCE,
    resource: `${EXCLUSIVE_POOLS_API_VERSION}/${EXCLUSIVE_POOLS_RESOURCE}`,
    source: () => ctx.sources.instances({ group: GROUP, version: VERSION, resource: EXCLUSIVE_POOLS_RESOURCE }),
  });
  const registers = [ctx.metrics.registry];
  const held = new Gauge({
    name: 'kubeplus_operator_exclusive_pools_namespaces',
    help: 'Node-isolated namespaces whose pools the last planned ExclusivePools parameter holds (the exclusive-pools policy keeps other namespaces off them).',
    registers,
  });
  const poolNodes = new Gauge({
    name: 'kubeplus_operator_exclusive_pools_nodes',
    help: 'Pool nodes (whose labels carry a pool’s whole nodeSelector) the last planned ExclusivePools parameter holds: a Pod of another namespace naming one in spec.nodeName is judged by the exclusive-pools policy. Over 5000 the parameter is not written.',
    registers,
  });
  const size = new Gauge({
    name: 'kubeplus_operator_exclusive_pools_parameter_bytes',
    help: 'Size of the last planned ExclusivePools parameter (JSON of its spec); over 1000000 bytes it is not written.',
    registers,
  });
  const overlapping = new Gauge({
    name: 'kubeplus_operator_exclusive_pools_overlapping_namespaces',
    help: 'Node-isolated namespaces whose own mandate reaches another namespace’s exclusive pool (selects its labels or tolerates its taints): not refused by the policy, reported by an ExclusivePoolsOverlap Warning Event on the owning instance.',
    registers,
  });
  const reconciler = new ExclusivePoolsReconciler({
    namespaces,
    nodes,
    params,
    port: feature.port,
    hooks: {
      planned(n, nodeCount, bytes) {
        held.set(n);
        poolNodes.set(nodeCount);
        size.set(bytes);
      },
      overlapping(n) {
        overlapping.set(n);
      },
    },
    resolveOwner: deps.resolveOwner,
    recordEvent: recordEvent(ctx),
    logger: ctx.logger.child({ component: EXCLUSIVE_POOLS_CONTROLLER }),
  });
  const one = (): string => EXCLUSIVE_POOLS_NAME;
  return {
    reconciler,
    // The first leading term plans at once, even with no isolated namespace and no parameter yet.
    sources: [
      {
        subscribe(enqueue) {
          enqueue(one());
          return () => {};
        },
      },
      informerKeySource(namespaces, one),
      nodeLabelChanges(nodes, EXCLUSIVE_POOLS_NAME),
      informerKeySource(params, one),
    ],
    concurrency: 1,
  };
}
