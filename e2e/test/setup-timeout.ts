import { jest } from '@jest/globals';

// testTimeout is a global (not per-project) jest option; e2e tests wait on real controllers.
jest.setTimeout(300_000);
