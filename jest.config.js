// One jest config for the monorepo. Projects: `unit` (fast, no cluster) and `e2e` (a real
// kube-apiserver; see e2e/README.md). TypeScript is compiled by @swc/jest as ESM, so jest
// runs with --experimental-vm-modules (see Makefile).
import { readFileSync } from 'node:fs';

// The suites that need the real node (e2e/README.md "A real node"), listed in
// e2e/test/real-node-suites.json. Its kubelet is the newest pinned minor's and must never be newer
// than its API server, so on an older control plane (KUBEPLUS_ISOLATION_K8S, the version matrix)
// they are not run; e2e/test/global-setup.ts says so, and e2e/test/harness/suite-lists.test.ts fails
// if a suite starting a real node is missing from the list.
const REAL_NODE_SUITES = JSON.parse(readFileSync(new URL('./e2e/test/real-node-suites.json', import.meta.url), 'utf8'));
const nodeMinor = /^\s*k8s\.io\/kubernetes v(\d+\.\d+)\./m.exec(
  readFileSync(new URL('./e2e/components/k8s/go.mod', import.meta.url), 'utf8'),
)?.[1];
const requestedMinor = process.env.KUBEPLUS_ISOLATION_K8S || nodeMinor;
const minorNumber = (m) => Number(m.split('.')[1]);
// The chart's floor (Chart.yaml kubeVersion ">=1.30.0-0"): below it only the refusal is checked.
const floorMinor = /^kubeVersion:\s*"?>=\s*(\d+\.\d+)/m.exec(
  readFileSync(new URL('./deploy/kubeplus-isolation/Chart.yaml', import.meta.url), 'utf8'),
)?.[1];
const belowFloor = minorNumber(requestedMinor) < minorNumber(floorMinor);
/**
 * On an older minor (or with KUBEPLUS_ISOLATION_E2E_API_ONLY=1, `make test-matrix` on the newest),
 * only the API-level suites run.
 */
const e2eIgnored =
  requestedMinor === nodeMinor && process.env.KUBEPLUS_ISOLATION_E2E_API_ONLY !== '1'
    ? []
    : REAL_NODE_SUITES.map((f) => `<rootDir>/${f}`);

const swc = [
  '@swc/jest',
  {
    jsc: { target: 'es2022', parser: { syntax: 'typescript' }, keepClassNames: true },
    module: { type: 'es6' },
    sourceMaps: 'inline',
  },
];
const base = {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: { '^.+\\.ts$': swc },
  moduleNameMapper: {
    '^@kubeplus-isolation/spec$': '<rootDir>/packages/spec/src/index.ts',
    '^@kubeplus-isolation/service$': '<rootDir>/packages/service/src/index.ts',
    '^@kubeplus-isolation/cli$': '<rootDir>/packages/cli/src/cli.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  rootDir: import.meta.dirname,
};
export default {
  projects: [
    {
      ...base,
      displayName: 'unit',
      testMatch: [
        '<rootDir>/packages/*/test/**/*.test.ts',
        '<rootDir>/services/*/test/**/*.test.ts',
        '<rootDir>/bench/test/**/*.test.ts',
        '<rootDir>/scripts/test/**/*.test.ts',
      ],
      // bench/src imports the operator's and the harness's built output; the tests use their sources
      // (make test-unit does not build).
      moduleNameMapper: {
        ...base.moduleNameMapper,
        '^@kubeplus-isolation/operator/dist/(.*)\\.js$': '<rootDir>/services/operator/src/$1.ts',
        '^@kubeplus-isolation/e2e$': '<rootDir>/e2e/src/harness/index.ts',
      },
      // One temporary directory per run, removed at its end (scripts/jest/tmpdir-setup.js).
      globalSetup: '<rootDir>/scripts/jest/tmpdir-setup.js',
      globalTeardown: '<rootDir>/scripts/jest/tmpdir-teardown.js',
    },
    {
      // The Helm chart and the Dockerfiles (deploy/test): renders with the pinned helm binary
      // built by e2e/scripts/build-components.sh; no cluster.
      ...base,
      displayName: 'chart',
      testMatch: ['<rootDir>/deploy/test/**/*.test.ts'],
      globalSetup: '<rootDir>/scripts/jest/tmpdir-setup.js',
      globalTeardown: '<rootDir>/scripts/jest/tmpdir-teardown.js',
    },
    {
      // Real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) started once
      // by the global setup; see e2e/README.md. Suites share it, so run them in band (--runInBand).
      ...base,
      displayName: 'e2e',
      testMatch: belowFloor ? ['<rootDir>/e2e/test/kubernetes-versions.test.ts'] : ['<rootDir>/e2e/test/**/*.test.ts'],
      testPathIgnorePatterns: ['/node_modules/', ...e2eIgnored],
      // Suites use the harness sources; global setup/teardown and the environment, which jest loads
      // outside its module registry, use the built package (e2e/dist).
      moduleNameMapper: { ...base.moduleNameMapper, '^@kubeplus-isolation/e2e$': '<rootDir>/e2e/src/harness/index.ts' },
      testEnvironment: '<rootDir>/e2e/test/environment.ts',
      globalSetup: '<rootDir>/e2e/test/global-setup.ts',
      globalTeardown: '<rootDir>/e2e/test/global-teardown.ts',
      // Real controllers take seconds, and one test outlives node-monitor-grace-period (40s).
      setupFilesAfterEnv: ['<rootDir>/e2e/test/setup-timeout.ts'],
    },
  ],
};
