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
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  rootDir: import.meta.dirname,
};
export default {
  projects: [
    {
      ...base,
      displayName: 'unit',
      testMatch: ['<rootDir>/packages/*/test/**/*.test.ts', '<rootDir>/services/*/test/**/*.test.ts'],
    },
    {
      // The Helm chart and the Dockerfiles (deploy/test): renders with the pinned helm binary
      // built by e2e/scripts/build-components.sh; no cluster.
      ...base,
      displayName: 'chart',
      testMatch: ['<rootDir>/deploy/test/**/*.test.ts'],
    },
  ],
};
