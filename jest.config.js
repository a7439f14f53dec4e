// One jest config for the monorepo. Projects: `unit` (fast, no cluster) and `e2e` (a real
// kube-apiserver; see e2e/README.md). TypeScript is compiled by @swc/jest as ESM, so jest
// runs with --experimental-vm-modules (see Makefile).
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
      testMatch: ['<rootDir>/e2e/test/**/*.test.ts'],
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
