import {
  CoordinationV1Api,
  CoreV1Api,
  type KubeConfig,
  makeInformer,
  type V1Lease,
  type V1Node,
  type V1NodeCondition,
  type V1Pod,
  type V1Taint,
} from '@kubernetes/client-node';
import { isApiStatus, labelNode, mergePatch, strategicMergePatch, taintNode, untaintNode } from './node-api.js';
import { describeError, waitFor } from './wait.js';

/**
 * Fake nodes, as kwok does it: Node objects with capacity and a Ready condition whose heartbeats
 * (status condition lastHeartbeatTime and the kube-node-lease Lease) are kept fresh, so the
 * node-lifecycle controller keeps them Ready and the real scheduler binds Pods to them. Nothing
 * runs the Pods: a bound Pod stays Pending, and `spec.nodeName` is what tests read. Like a kubelet,
 * the fake nodes finish the graceful deletion of their Pods, so namespaces holding bound Pods can
 * be deleted.
 */

export const FAKE_NODE_LABEL = 'kubeplus-isolation.e2e/fake-node';
export const NODE_LEASE_NAMESPACE = 'kube-node-lease';
const NOT_READY_TAINT = 'node.kubernetes.io/not-ready';

export interface FakeNodeOptions {
  /** Default 32 CPUs, 256Gi memory, 110 pods. */
  capacity?: { cpu?: string; memory?: string; pods?: string };
  /** Labels for every node (merged over the defaults: hostname, os, arch, FAKE_NODE_LABEL). */
  labels?: Record<string, string>;
  /** Taints set at creation. */
  taints?: V1Taint[];
  /** Status and Lease heartbeat period (default 10s). */
  heartbeatIntervalMs?: number;
  /** Wait until the node controller has removed the not-ready taint (default true). */
  waitSchedulable?: boolean;
  /** Called when a heartbeat or pod finalization fails (default: console.error). */
  onError?: (message: string, error: unknown) => void;
}

export interface FakeNodes {
  readonly names: readonly string[];
  /** When each node's heartbeats last succeeded (status and lease). */
  lastHeartbeat(name: string): Date | undefined;
  taint(name: string, taint: V1Taint): Promise<V1Node>;
  untaint(name: string, key: string, effect?: string): Promise<V1Node>;
  label(name: string, labels: Record<string, string | null>): Promise<V1Node>;
  /** Stops heartbeats and pod finalization; deletes the Nodes (and their Leases) unless told not to. */
  stop(opts?: { deleteNodes?: boolean }): Promise<void>;
}

const CONDITIONS: readonly Pick<V1NodeCondition, 'type' | 'status' | 'reason'>[] = [
  { type: 'Ready', status: 'True', reason: 'KubeletReady' },
  { type: 'MemoryPressure', status: 'False', reason: 'KubeletHasSufficientMemory' },
  { type: 'DiskPressure', status: 'False', reason: 'KubeletHasNoDiskPressure' },
  { type: 'PIDPressure', status: 'False', reason: 'KubeletHasSufficientPID' },
];

/** The kubelet's four node conditions, heartbeat `now`, unchanged since `since`. */
export function fakeNodeConditions(now: Date, since: Date): V1NodeCondition[] {
  return CONDITIONS.map((c) => ({
    ...c,
    message: 'fake node (kubeplus-isolation e2e)',
    lastHeartbeatTime: now,
    lastTransitionTime: since,
  }));
}

/** MicroTime (RFC 3339 with microseconds), the format of Lease renewTime. */
const microTime = (d: Date): string => `${d.toISOString().slice(0, 23)}000Z`;

/** The Node object as created (spec and metadata; status is written through the status subresource). */
export function fakeNodeManifest(name: string, opts: FakeNodeOptions = {}): V1Node {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: {
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        [FAKE_NODE_LABEL]: 'true',
        ...opts.labels,
      },
      annotations: { 'node.alpha.kubernetes.io/ttl': '0' },
    },
    spec: { taints: opts.taints ?? [] },
  };
}

export function fakeNodeStatus(name: string, opts: FakeNodeOptions, now: Date, since: Date): V1Node['status'] {
  const capacity = { cpu: '32', memory: '256Gi', pods: '110', ...opts.capacity };
  return {
    capacity,
    allocatable: capacity,
    conditions: fakeNodeConditions(now, since),
    addresses: [{ type: 'Hostname', address: name }],
    daemonEndpoints: { kubeletEndpoint: { Port: 0 } },
    nodeInfo: {
      machineID: name,
      systemUUID: name,
      bootID: name,
      kernelVersion: 'fake',
      osImage: 'fake',
      containerRuntimeVersion: 'fake://0',
      kubeletVersion: 'fake',
      kubeProxyVersion: 'fake',
      operatingSystem: 'linux',
      architecture: 'amd64',
    },
  };
}

export async function startFakeNodes(
  kc: KubeConfig,
  names: readonly string[],
  opts: FakeNodeOptions = {},
): Promise<FakeNodes> {
  if (new Set(names).size !== names.length)
    throw new Error(`startFakeNodes: duplicate node names in ${names.join(', ')}`);
  const core = kc.makeApiClient(CoreV1Api);
  const coordination = kc.makeApiClient(CoordinationV1Api);
  const onError =
    opts.onError ?? ((message, error) => console.error(`fake nodes: ${message}: ${describeError(error)}`));
  const interval = opts.heartbeatIntervalMs ?? 10_000;
  const since = new Date();
  const beats = new Map<string, Date>();
  const ours = new Set(names);
  let stopped = false;

  const heartbeat = async (name: string): Promise<void> => {
    const now = new Date();
    await core.patchNodeStatus(
      { name, body: { status: { conditions: fakeNodeConditions(now, since) } } },
      strategicMergePatch,
    );
    await coordination.patchNamespacedLease(
      { name, namespace: NODE_LEASE_NAMESPACE, body: { spec: { renewTime: microTime(now), holderIdentity: name } } },
      mergePatch,
    );
    beats.set(name, now);
  };

  const create = async (name: string): Promise<void> => {
    const node = await core.createNode({ body: fakeNodeManifest(name, opts) });
    // A patch, not a replace: the node controller edits the new Node concurrently (taints, annotations).
    await core.patchNodeStatus(
      { name, body: { status: fakeNodeStatus(name, opts, new Date(), since) } },
      strategicMergePatch,
    );
    const lease: V1Lease = {
      metadata: {
        name,
        namespace: NODE_LEASE_NAMESPACE,
        // Garbage-collected with the Node, as the kubelet's lease is.
        ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name, uid: node.metadata?.uid ?? '' }],
      },
      spec: { holderIdentity: name, leaseDurationSeconds: 40 },
    };
    await coordination.createNamespacedLease({ namespace: NODE_LEASE_NAMESPACE, body: lease });
    await heartbeat(name);
  };
  await Promise.all(names.map(create));

  // Heartbeats: a timeout chain (never two rounds at once), unref'ed so it never holds the process open.
  let timer: NodeJS.Timeout | undefined;
  const beatAll = async (): Promise<void> => {
    await Promise.all(
      names.map((name) =>
        heartbeat(name).catch((error: unknown) => stopped || onError(`heartbeat of node ${name} failed`, error)),
      ),
    );
    if (!stopped) timer = setTimeout(beatAll, interval).unref();
  };
  timer = setTimeout(beatAll, interval).unref();

  // The kubelet's last step of graceful deletion: confirm termination with a zero-grace delete.
  const finalizing = new Set<string>();
  const finalize = (pod: V1Pod): void => {
    const { name, namespace, uid, deletionTimestamp } = pod.metadata ?? {};
    if (!deletionTimestamp || !name || !namespace || !uid || !ours.has(pod.spec?.nodeName ?? '') || finalizing.has(uid))
      return;
    finalizing.add(uid);
    core
      .deleteNamespacedPod({
        name,
        namespace,
        gracePeriodSeconds: 0,
        body: { gracePeriodSeconds: 0, preconditions: { uid } },
      })
      .catch((error: unknown) => {
        if (!isApiStatus(error, 404) && !isApiStatus(error, 409))
          onError(`finalizing pod ${namespace}/${name} failed`, error);
      })
      .finally(() => finalizing.delete(uid));
  };
  const informer = makeInformer<V1Pod>(kc, '/api/v1/pods', () => core.listPodForAllNamespaces());
  informer.on('add', finalize);
  informer.on('update', finalize);
  informer.on('error', (error: unknown) => {
    if (stopped) return;
    onError('pod watch failed; restarting in 1s', error);
    setTimeout(() => {
      if (!stopped) informer.start().catch((e: unknown) => onError('pod watch restart failed', e));
    }, 1_000).unref();
  });
  await informer.start();

  if (opts.waitSchedulable ?? true) {
    await waitFor(
      `the node controller to mark fake nodes ${names.join(', ')} schedulable (no ${NOT_READY_TAINT} taint)`,
      async (observe) => {
        const nodes = await Promise.all(names.map((name) => core.readNode({ name })));
        const pending = nodes.filter((n) => (n.spec?.taints ?? []).some((t) => t.key === NOT_READY_TAINT));
        observe(pending.map((n) => ({ node: n.metadata?.name, taints: n.spec?.taints })));
        return pending.length === 0;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
  }

  return {
    names,
    lastHeartbeat: (name) => beats.get(name),
    taint: (name, taint) => taintNode(kc, name, taint),
    untaint: (name, key, effect) => untaintNode(kc, name, key, effect),
    label: (name, labels) => labelNode(kc, name, labels),
    async stop({ deleteNodes = true } = {}) {
      if (stopped) return;
      stopped = true;
      if (timer) clearTimeout(timer);
      await informer.stop();
      if (deleteNodes) {
        await Promise.all(
          names.map((name) =>
            core.deleteNode({ name }).catch((error: unknown) => {
              if (!isApiStatus(error, 404)) throw error;
            }),
          ),
        );
      }
    },
  };
}
