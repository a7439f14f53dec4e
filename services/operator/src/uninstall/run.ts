/**
 * `--uninstall`: the I/O shell around plan.ts, run by the chart's pre-delete hook as the
 * operator's own ServiceAccount (so its RBAC and the tamper guard's exemption apply).
 *
 * 1. Stop the operator: scale its Deployment (`--uninstall-stop-deployment`, in the
 *    leader-election namespace) to zero and wait until none of its Pods is left, so no leader
 *    puts back what the next steps remove.
 * 2. Read the inventory fresh from the API server: instances of every watched Kind (the same
 *    selection as the running operator), the generated objects of every served kind (compliance
 *    Reports included, when the OpenReports API is served), Namespaces.
 * 3. Make the plan's writes. A write refused with 409 (the object changed since it was read) or
 *    gone (404) is not an error: the inventory is read again and planned again, up to 5 rounds.
 *
 * Every action is logged; the summary goes to stdout (`kubectl logs job/…`). Any other failure
 * throws: the Job fails, `helm uninstall` reports the failed hook, and running it again retries.
 */
import { httpStatusOf, type Logger } from '@kubeplus-isolation/service';
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '@kubeplus-isolation/spec';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Config } from '../config.js';
import { REPORT_API_VERSION, REPORT_GROUP } from '../controllers/compliance/openreport.js';
import { splitApiVersion } from '../desired/instance.js';
import { namespaceMetaOf } from '../desired/node-isolation.js';
import {
  type ManagedObject,
  type ManagedType,
  NODE_ISOLATION_PARAMS_TYPE,
  RUNTIME_CLASS_API_VERSION,
  SANDBOX_ISOLATION_PARAMS_TYPE,
  VALIDATING_POLICY_API_VERSION,
} from '../desired/objects.js';
import { selectInstanceKind } from '../instance-kinds/registry.js';
import { KubeClusterPort } from '../kube/cluster-port.js';
import { discoverPolicyApis } from '../kube/discovery.js';
import { UninstallApi } from '../kube/uninstall-api.js';
import { isConflict } from '../runtime/errors.js';
import {
  describeAction,
  type InstanceFinalizers,
  planUninstall,
  type UninstallAction,
  type UninstallInventory,
  type UninstallMode,
} from './plan.js';

const ROUNDS = 5;

export interface UninstallOptions {
  mode: UninstallMode;
  /** The operator Deployment to scale to zero first (in config.leaderElectionNamespace); undefined: none. */
  stopDeployment: string | undefined;
  /** How long the operator's Pods may take to go (default 120 s). */
  stopTimeoutMs?: number;
}

export interface UninstallSummary {
  actions: number;
  byType: Record<UninstallAction['type'], number>;
  rounds: number;
}

const REPORT_KIND = 'Report';
const REPORT_TYPE: ManagedType = { apiVersion: REPORT_API_VERSION, kind: REPORT_KIND };

async function readInventory(
  api: UninstallApi,
  kc: KubeConfig,
  config: Config,
  port: KubeClusterPort,
  log: Logger,
): Promise<UninstallInventory> {
  const crds = await api.listCrds();
  const instances: InstanceFinalizers[] = [];
  for (const crd of crds) {
    const selected = selectInstanceKind(crd, config.instanceKinds);
    if (selected === undefined) continue;
    const { group, version, resource: plural } = selected.gvr;
    const items = await api.listCustomObjects({ group, version, plural });
    for (const item of items) {
      const meta = item.metadata ?? {};
      instances.push({
        key: { group, version, kind: selected.kind, plural, namespace: meta.namespace ?? '', name: meta.name ?? '' },
        finalizers: meta.finalizers ?? [],
        resourceVersion: meta.resourceVersion ?? '',
      });
    }
  }

  const apis = await discoverPolicyApis(kc);
  const types: ManagedType[] = [{ apiVersion: RUNTIME_CLASS_API_VERSION, kind: 'RuntimeClass' }];
  // The NodeIsolation CRD exists only with the admission-policy engine (and then the operator may
  // list its objects); asking for it otherwise would be a 403, not a 404.
  const params = splitApiVersion(NODE_ISOLATION_PARAMS_TYPE.apiVersion);
  if ((await port.resolveKind(params.group, NODE_ISOLATION_PARAMS_TYPE.kind)) !== undefined) {
    types.push(NODE_ISOLATION_PARAMS_TYPE);
  }
  // Likewise the SandboxIsolation CRD, installed with the shared sandbox policy layout.
  if ((await port.resolveKind(params.group, SANDBOX_ISOLATION_PARAMS_TYPE.kind)) !== undefined) {
    types.push(SANDBOX_ISOLATION_PARAMS_TYPE);
  }
  if (apis.validating) {
    types.push(
      { apiVersion: VALIDATING_POLICY_API_VERSION, kind: 'ValidatingAdmissionPolicy' },
      { apiVersion: VALIDATING_POLICY_API_VERSION, kind: 'ValidatingAdmissionPolicyBinding' },
    );
  }
  if (apis.mutatingVersion !== undefined) {
    types.push(
      { apiVersion: apis.mutatingVersion, kind: 'MutatingAdmissionPolicy' },
      { apiVersion: apis.mutatingVersion, kind: 'MutatingAdmissionPolicyBinding' },
    );
  }
  const objects: ManagedObject[] = [];
  for (const type of types) {
    objects.push(...(await port.listObjects(type, `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`)));
  }
  // The compliance Reports, when the OpenReports API is served. The operator may list them only
  // while reports are on (chart operator.reports.enabled); otherwise there are none of its own.
  if ((await port.resolveKind(REPORT_GROUP, REPORT_KIND)) !== undefined) {
    try {
      objects.push(...(await port.listObjects(REPORT_TYPE, `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`)));
    } catch (err) {
      if (httpStatusOf(err) !== 403) throw err;
      log.warn(
        `not allowed to list ${REPORT_API_VERSION} Reports (reports were turned off): any left from before stay; delete them with kubectl delete reports -A -l ${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`,
      );
    }
  }

  const namespaces = (await api.listNamespaces()).map((ns) => namespaceMetaOf(ns.metadata?.name ?? '', ns));
  return { instances, objects, namespaces };
}

async function apply(port: KubeClusterPort, action: UninstallAction): Promise<void> {
  switch (action.type) {
    case 'deleteObject':
      return port.deleteObject(action.ref, action.uid === undefined ? {} : { uid: action.uid });
    case 'patchNamespace':
      return port.patchNamespace(action.name, action.patch, action.resourceVersion);
    case 'removeFinalizer':
      return port.setInstanceFinalizers(action.key, action.finalizers, action.resourceVersion);
  }
}

/** Runs the uninstall cleanup; resolves with what was done, rejects on a failure to retry. */
export async function runUninstall(
  kc: KubeConfig,
  config: Config,
  options: UninstallOptions,
  log: Logger,
): Promise<UninstallSummary> {
  const api = new UninstallApi(kc);
  if (options.stopDeployment !== undefined) {
    await api.stopDeployment(
      config.leaderElectionNamespace,
      options.stopDeployment,
      options.stopTimeoutMs ?? 120_000,
      log,
    );
  }
  const port = new KubeClusterPort(kc);
  const summary: UninstallSummary = {
    actions: 0,
    byType: { deleteObject: 0, patchNamespace: 0, removeFinalizer: 0 },
    rounds: 0,
  };
  for (let round = 1; round <= ROUNDS; round++) {
    summary.rounds = round;
    const actions = planUninstall(await readInventory(api, kc, config, port, log), options.mode);
    if (actions.length === 0) return summary;
    let retry = false;
    // A namespace whose keys could not be removed this round keeps its NodeIsolation parameter
    // until they are (planUninstall: the label goes first).
    const stillLabelled = new Set<string>();
    for (const action of actions) {
      if (
        action.type === 'deleteObject' &&
        action.ref.kind === NODE_ISOLATION_PARAMS_TYPE.kind &&
        stillLabelled.has(action.ref.namespace ?? '')
      ) {
        retry = true;
        continue;
      }
      try {
        await apply(port, action);
        summary.actions++;
        summary.byType[action.type]++;
        log.info(describeAction(action), { mode: options.mode, round });
      } catch (err) {
        if (!isConflict(err) && httpStatusOf(err) !== 404) throw err;
        log.info(`changed meantime, read again: ${describeAction(action)}`, { round });
        if (action.type === 'patchNamespace') stillLabelled.add(action.name);
        retry = true;
      }
    }
    if (!retry) return summary;
  }
  throw new Error(`objects kept changing: still not done after ${ROUNDS} rounds`);
}
