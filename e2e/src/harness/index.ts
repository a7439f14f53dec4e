export * from '../kubeplus-standin/index.js';
export {
  AGENT_SANDBOX_DEPLOYMENT,
  AGENT_SANDBOX_NAMESPACE,
  agentSandboxImage,
  agentSandboxManifests,
  agentSandboxVersion,
  convertingCrds,
  installAgentSandbox,
  servedSandboxVersions,
} from './agent-sandbox.js';
export {
  type ApiProxy,
  type ApiProxyOptions,
  type Hold,
  type ProxiedRequest,
  startApiProxy,
} from './api-proxy.js';
export { type Assets, assetsIn, CONTROL_PLANE_BINARIES, REQUIRED_BINARIES, resolveAssets } from './assets.js';
export { Cluster, type ClusterState, FAILURE_MARKER, logFilesIn, logReport, readState, STATE_FILE } from './cluster.js';
export {
  API_SERVER_HOSTS,
  COMPONENTS,
  type Component,
  KUBERNETES_SERVICE_IP,
  NODE_PLACEMENT_ADMISSION_PLUGINS,
  SERVICE_ACCOUNT_ISSUER,
  SERVICE_CLUSTER_IP_RANGE,
} from './components.js';
export {
  type ComponentControl,
  ControlPlane,
  type ControlPlaneOptions,
  type StopComponentOptions,
  type StopOptions,
  startControlPlane,
} from './control-plane.js';
export {
  type InstanceKind,
  installCrds,
  installOpenReportsCrds,
  installSandboxCrds,
  instanceKindCrd,
  loadCrds,
  sandboxIsolationParamsCrd,
} from './crds.js';
export { describeSweep, type SweepReport, sweepDeadRuns } from './dead-runs.js';
export {
  FAKE_NODE_LABEL,
  type FakeNodeOptions,
  type FakeNodes,
  fakeNodeManifest,
  NODE_LEASE_NAMESPACE,
  startFakeNodes,
} from './fake-nodes.js';
export { appVersion, imageArchives, type ProjectService, projectImage } from './images.js';
export { kubeconfigYaml, loadKubeConfig, writeKubeconfig } from './kubeconfig.js';
export {
  compareMinors,
  FLOOR_MINOR,
  MUTATING_POLICY_BETA_ARGS,
  minorOf,
  nodeMinor,
  type PolicyApiSupport,
  policyApiSupport,
  requestedMinor,
  servedPolicyApis,
} from './kubernetes-versions.js';
export { refusedLogLines, reportsRefusal } from './log-refusals.js';
export {
  type MetricSample,
  parsePrometheusText,
  scrapeApiServerMetrics,
  scrapeMetrics,
  sumMetric,
} from './metrics.js';
export { createTestNamespace, deleteNamespace, type NamespaceOptions } from './namespaces.js';
export * from './node/index.js';
export { isApiStatus, labelNode, taintNode, untaintNode } from './node-api.js';
export {
  LEASE_PRESETS,
  type LeaderElection,
  type LeasePreset,
  type LeaseTimings,
  type LogLine,
  leaseFlags,
  type OperatorOptions,
  operatorFlags,
  type RunningOperator,
  startOperator,
} from './operator.js';
export { type CertAndKey, CertificateAuthority } from './pki.js';
export { podCondition, testPod, waitForPod, waitForPodBound, waitForPodUnschedulable } from './pods.js';
export { instancePolicyName, legacyInstancePolicyName, type PolicyRole } from './policy-names.js';
export { freePorts } from './ports.js';
export { describeExit, type ManagedProcess, type ProcessExit } from './process.js';
export { serveRegistry, type TestRegistry } from './registry.js';
export { openReportsCrdsDir, repoRoot, sandboxCrdsDir, sandboxCrdsDirOf, webhookEntryPath } from './repo.js';
export { ownerAlive, processStartTime, type RunOwner, readOwner, runOwner } from './run-owner.js';
export { connectE2eCluster, E2E_STATE_ENV, e2eStatePath } from './run-state.js';
export { getSecureMetrics, metricsReaderToken, scrapeSecureMetrics } from './secure-metrics.js';
export { writeServiceAccountKubeconfig } from './service-accounts.js';
export {
  type RunningService,
  type RunningWebhook,
  type ServiceOptions,
  startService,
  startWebhook,
  type WebhookOptions,
} from './services.js';
export { acquireSweepLock, type LockAttempt, SWEEP_LOCK } from './sweep-lock.js';
export {
  BUSYBOX_ARCHIVE,
  exclusionsOf,
  failureBlocks,
  outputTail,
  parseOutcome,
  parseTestList,
  runArgs,
  summarize,
  UPSTREAM_BINARIES,
  UPSTREAM_EXCLUSIONS,
  UPSTREAM_IMAGE_STANDINS,
  type UpstreamExclusion,
  type UpstreamOutcome,
  type UpstreamPackage,
  type UpstreamPlanEntry,
  type UpstreamResult,
  upstreamPlan,
} from './upstream-suite.js';
export { FatalWaitError, sleep, waitFor } from './wait.js';
export {
  DEFAULT_WEBHOOK_CONFIGURATION_NAME,
  loadHoldEntry,
  loadWebhookEntry,
  mutatingWebhookConfiguration,
  registerWebhook,
  unregisterWebhook,
  type WebhookRegistration,
} from './webhook-config.js';
