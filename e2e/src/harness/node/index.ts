export { cgroupHierarchies, createCgroupRoot, processesInCgroupRoot, removeCgroupRoot } from './cgroups.js';
export {
  type NodeLayout,
  nodeLayout,
  RUNSC_HANDLER,
  RUNSC_RUNTIME_CLASS,
  registryHostsToml,
  runscConfig,
} from './config.js';
export {
  comparableHostStates,
  DEFAULT_NODE_PATHS,
  gvisorProcesses,
  type HostState,
  hostState,
  type OwnRun,
} from './host-state.js';
export { KUBELET_SYSCTLS, readSysctls, sysctlRecordPath } from './host-sysctls.js';
export { type NodeNamespace, processesInMountNamespace } from './namespace.js';
export { ipInCidr, type NodeNetwork, nodeNetwork } from './network.js';
export { assertRealNodeSupported, type MachineFacts, machineFacts, realNodePreflight } from './preflight.js';
export {
  NODE_BINARIES,
  type RealNodeCluster,
  type RealNodeOptions,
  resolveNodeAssets,
  startRealNodeCluster,
} from './real-node.js';
export { NODE_RUNS_DIR, type NodeRunRecord, readNodeRunRecords, writeNodeRunRecord } from './run-record.js';
