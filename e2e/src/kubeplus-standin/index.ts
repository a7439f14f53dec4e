/**
 * The KubePlus STAND-IN (not KubePlus): its decisions (contract.ts, pure) and its I/O shell
 * (standin.ts). Shared by the e2e suites and `make demo` (e2e/README.md "A KubePlus stand-in").
 */
export * from './standin.js';
