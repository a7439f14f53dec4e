// Pins the OpenReports API release: its CustomResourceDefinitions (config/crd/ in the module),
// installed by the e2e tests that assert the operator's compliance reports.
// Fetched by e2e/scripts/module-crds.sh openreports; see ../README.md.
module kubeplus-isolation/e2e/components/openreports

go 1.26.0

require github.com/openreports/reports-api v0.2.1
