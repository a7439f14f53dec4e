/**
 * The exclusive-pools reconciler: ONE key, the cluster's ExclusivePools object. Level-triggered:
 * every reconcile reads every isolated namespace's resolved mandate from the Namespace cache,
 * plans the parameter (desired/exclusive-pools.ts) and writes it only when the cached object says
 * something else (or is missing: created; edited by hand: put back). A namespace whose resolved
 * annotation does not parse holds no pool here (the webhook ignores it too). A parameter larger
 * than EXCLUSIVE_POOLS_MAX_BYTES is not written: the last one stays, the error is logged and
 * retried with backoff, and the size gauge shows it.
 */
import { describeError, type Logger } from '@kubeplus-isolation/service';
import {
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  parseNodeIsolation,
} from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  EXCLUSIVE_POOLS_MAX_BYTES,
  EXCLUSIVE_POOLS_NAME,
  exclusivePoolsObject,
  exclusivePoolsSpec,
  type Mandate,
  specBytes,
  specUpToDate,
} from '../../desired/exclusive-pools.js';
import type { Lister } from '../../runtime/informer.js';
import type { Reconciler } from '../../runtime/manager.js';
import type { ReconcileOutcome } from '../../runtime/worker-pool.js';

export const EXCLUSIVE_POOLS_CONTROLLER = 'exclusive-pools';

export interface ExclusivePoolsPort {
  /** Creates the object (`resourceVersion` undefined) or replaces it on that resourceVersion. */
  write(object: KubernetesObject, resourceVersion: string | undefined): Promise<void>;
}

export interface ExclusivePoolsHooks {
  /** After each plan: the namespaces it holds and its size in bytes. */
  planned(namespaces: number, bytes: number): void;
}

export interface ExclusivePoolsReconcilerOptions {
  /** The Namespaces labelled node-isolation-enabled. */
  namespaces: Lister<KubernetesObject>;
  /** The cached ExclusivePools object(s) labelled managed-by. */
  params: Lister<KubernetesObject>;
  port: ExclusivePoolsPort;
  hooks: ExclusivePoolsHooks;
  logger: Logger;
}

/** The resolved mandates of `namespaces` (any shape): unparsable annotations hold nothing. */
export function mandatesOf(namespaces: readonly KubernetesObject[]): Mandate[] {
  const out: Mandate[] = [];
  for (const ns of namespaces) {
    const name = ns.metadata?.name;
    const parsed = parseNodeIsolation(ns.metadata?.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION]);
    if (name !== undefined && parsed.ok) out.push({ namespace: name, spec: parsed.value });
  }
  return out;
}

export class ExclusivePoolsReconciler implements Reconciler {
  readonly name = EXCLUSIVE_POOLS_CONTROLLER;

  constructor(private readonly options: ExclusivePoolsReconcilerOptions) {}

  async reconcile(): Promise<ReconcileOutcome> {
    const { namespaces, params, port, hooks, logger } = this.options;
    const mandates = mandatesOf(namespaces.list());
    const spec = exclusivePoolsSpec(mandates);
    const bytes = specBytes(spec);
    hooks.planned(spec.namespaces, bytes);
    const stored = params.get(EXCLUSIVE_POOLS_NAME);
    if (stored !== undefined && specUpToDate((stored as { spec?: unknown }).spec, spec)) return;
    if (bytes > EXCLUSIVE_POOLS_MAX_BYTES) {
      throw new Error(
        `the exclusive-pools parameter of ${spec.namespaces} mandates would take ${bytes} bytes, more than the ${EXCLUSIVE_POOLS_MAX_BYTES} written at most (etcd's limit is 1.5 MiB): the last one written stays in force`,
      );
    }
    const object = exclusivePoolsObject(spec, { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE });
    try {
      await port.write(object, stored?.metadata?.resourceVersion);
    } catch (err) {
      logger.debug('exclusive-pools write failed', { error: describeError(err) });
      throw err;
    }
    logger.info('exclusive pools written', { namespaces: spec.namespaces, bytes });
  }
}
