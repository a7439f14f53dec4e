// Pins the Agent Sandbox release whose CRDs (k8s/crds/*.yaml in the module) the tests install.
// Fetched by e2e/scripts/agent-sandbox-crds.sh; see ../README.md.
module kubeplus-isolation/e2e/components/agent-sandbox

go 1.26.0

require sigs.k8s.io/agent-sandbox v0.5.0
